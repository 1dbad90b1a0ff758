"""A window's events counted per bucket of scaled time: what a shaped replay's plan serves under its
ceiling (``spark_job.publish.time_shape``), from the event times a table reader returned."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc


def histogram(times: pa.ChunkedArray, *, origin: datetime, speed: float, width: float) -> list[int]:
    """``counts[i]``: events whose ``(time - origin) / speed`` falls in ``[i * width, (i + 1) * width)``;
    null times are left out, as the job leaves them out of its own count of the shape."""
    if len(times) == 0:
        return []
    micros = pc.cast(pc.cast(times, pa.timestamp("us", tz="UTC")), pa.int64())
    scaled = pc.divide(pc.subtract(pc.cast(micros, pa.float64()), origin.timestamp() * 1e6), 1e6 * speed)
    buckets = pc.cast(pc.floor(pc.divide(scaled, width)), pa.int64())
    counted = pc.value_counts(pc.drop_null(buckets))
    found = {
        int(item["values"].as_py()): int(item["counts"].as_py())
        for item in counted
        if item["values"].as_py() is not None and item["values"].as_py() >= 0
    }
    counts = [0] * (max(found, default=-1) + 1)
    for index, count in found.items():
        counts[index] = count
    return counts
