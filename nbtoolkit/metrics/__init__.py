"""Metrics: log lines -> records (parse), metrics.jsonl -> records (series), jobs -> tables (compare)."""

from nbtoolkit.metrics.parse import LogParser
from nbtoolkit.metrics.series import METRICS_FILE, MetricsReader, Progress, read_metrics
from nbtoolkit.metrics.throughput import Throughput, steady_state

__all__ = ["METRICS_FILE", "LogParser", "MetricsReader", "Progress", "Throughput", "read_metrics", "steady_state"]
