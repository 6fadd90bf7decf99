"""Capture: agents reach ctxweb with no ctxweb code. The OTLP/HTTP traces receiver (OpenTelemetry
GenAI, OpenInference, OpenLLMetry and the Langfuse SDK export to it) turns model-call spans into
turns; it answers in OTLP's own shapes, protobuf or JSON."""
