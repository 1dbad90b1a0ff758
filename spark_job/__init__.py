"""The distributed, throttled, delivery-confirmed Kafka publisher (runs under spark-submit).

Each group imports only the ones listed after it, and nothing of ``daemon``, ``bot`` or ``store``:

    main          the spark-submit entry point: session, final REPLAY_RESULT / REPLAY_FAILED line
    warmup        a small job run once so the driver JVM's classes can be archived (not a replay)
    job           one run on the driver: select, distribute, publish, count
    pii/          decrypting declared columns on the executors (envelope format, data keys)
    transforms    the DataFrame -> DataFrame steps (read, window, records, partitions)
    publish/      slots, pacing, topic checks and the task body that sends and counts
    progress      beacons: confirmed counts readable from outside while a run goes
    kafka_conf    the librdkafka settings every client of the job shares
    spec/         the job spec: model, its decrypt section, parsing a document
    result        what a run reports
    errors, uris, arrow_map    the error tree, small documents at a path or S3 URI, mapInArrow
"""
