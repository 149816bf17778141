"""Counters of the server, rendered as Prometheus text (``GET /metrics``), with no client library."""

from __future__ import annotations

import bisect
import threading
from collections import Counter

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets, self.counts, self.sum, self.count = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str) -> list[str]:
        out, running = [], 0
        for bound, c in zip(self.buckets, self.counts):
            running += c
            out.append(f'{name}_bucket{{le="{bound:g}"}} {running}')
        out += [f'{name}_bucket{{le="+Inf"}} {self.count}', f"{name}_sum {self.sum:.6g}", f"{name}_count {self.count}"]
        return out


class Metrics:
    """Requests (by endpoint and status), samples scored, errors by kind, request latency, batch sizes
    (samples and requests per model batch) and the queue length. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter = Counter()
        self.errors: Counter = Counter()
        self.samples = 0
        self.latency = _Histogram(LATENCY_BUCKETS)
        self.batch_samples = _Histogram(SIZE_BUCKETS)
        self.batch_requests = _Histogram(SIZE_BUCKETS)
        self.queued = 0
        self.ready = 0

    def request(self, endpoint: str, status: int, seconds: float, samples: int = 0, error: str | None = None) -> None:
        with self._lock:
            self.requests[(endpoint, status)] += 1
            if endpoint == "/v1/score":
                self.latency.observe(seconds)
            self.samples += samples
            if error:
                self.errors[error] += 1

    def batch(self, samples: int, requests: int) -> None:
        with self._lock:
            self.batch_samples.observe(samples)
            self.batch_requests.observe(requests)

    def queue(self, samples: int) -> None:
        self.queued = samples

    def render(self) -> str:
        with self._lock:
            out = [
                "# HELP rewardzoo_requests_total HTTP requests answered, by endpoint and status.",
                "# TYPE rewardzoo_requests_total counter",
            ]
            out += [
                f'rewardzoo_requests_total{{endpoint="{e}",status="{s}"}} {n}'
                for (e, s), n in sorted(self.requests.items())
            ]
            out += [
                "# HELP rewardzoo_samples_total Samples scored.",
                "# TYPE rewardzoo_samples_total counter",
                f"rewardzoo_samples_total {self.samples}",
                "# HELP rewardzoo_errors_total Refused or failed score requests, by kind.",
                "# TYPE rewardzoo_errors_total counter",
            ]
            out += [f'rewardzoo_errors_total{{kind="{k}"}} {n}' for k, n in sorted(self.errors.items())]
            out += [
                "# HELP rewardzoo_request_seconds Latency of score requests.",
                "# TYPE rewardzoo_request_seconds histogram",
                *self.latency.lines("rewardzoo_request_seconds"),
                "# HELP rewardzoo_batch_samples Samples per model batch (several requests merged).",
                "# TYPE rewardzoo_batch_samples histogram",
                *self.batch_samples.lines("rewardzoo_batch_samples"),
                "# HELP rewardzoo_batch_requests Requests per model batch.",
                "# TYPE rewardzoo_batch_requests histogram",
                *self.batch_requests.lines("rewardzoo_batch_requests"),
                "# HELP rewardzoo_queue_samples Samples waiting in the queue.",
                "# TYPE rewardzoo_queue_samples gauge",
                f"rewardzoo_queue_samples {self.queued}",
                "# HELP rewardzoo_ready Whether the models are loaded.",
                "# TYPE rewardzoo_ready gauge",
                f"rewardzoo_ready {self.ready}",
            ]
            return "\n".join(out) + "\n"
