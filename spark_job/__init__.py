"""The distributed, throttled, delivery-confirmed Kafka publisher (runs under spark-submit)."""
