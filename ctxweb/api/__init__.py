"""The REST API under ``/api/v1/``: one module per resource (DRF views with their input and output
serializers), the contract's error shape, body parsers, throttling and the API-key scheme. Views
call the domain's services and selectors (:mod:`ctxweb.contexts`); they never touch models or
the ``compaction`` library but for its errors."""
