"""The dashboard's pages: one views module per page, the preview's form, chart maths and template
tags. Pages call the domain's services and selectors (:mod:`ctxweb.contexts`) and render
templates under ``templates/``; they never touch models or the ``compaction`` library."""
