"""Running the processors over frames: the engine, queues, live and file pipelines, metrics and
the governor."""
