"""A small OpenAI-compatible chat-completions server for the endpoint tests, on 127.0.0.1.

It runs a real (tiny) Qwen-VL through transformers alone (AutoProcessor, AutoModelForImageTextToText,
``generate`` with ``output_scores``), behind the chat-completions JSON shape, with what ``transformers serve``
lacks here: ``logprobs`` / ``top_logprobs``. Nothing of rewardzoo is imported, so it is an independent
reference for the endpoint backend. ``max_batch > 1`` batches requests that arrive together (waiting at most
``batch_wait_s`` for more, one left-padded ``generate`` per batch), as vLLM and SGLang do; otherwise requests
run one at a time. Faults for the retry tests: ``fail_next(503, 2)`` answers the next two
requests with 503, ``hang_next(seconds)`` holds the next answer back, ``garbage_next()`` answers 200 with a body
that is not JSON. ``requests`` counts the requests it received, ``in_flight_max`` the most at once.
``render``: the server's own prompt rendering (``messages -> text``, content parts as transformers'
``{"type": "image"}`` / ``{"type": "text", ...}``) in place of the processor's chat template, as a server
started with ``--chat-template`` renders; ``prompts`` keeps each rendered prompt.
"""

from __future__ import annotations

import base64
import io
import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor


class ChatServer:
    def __init__(
        self, model_dir: str, *, delay_s: float = 0.0, max_batch: int = 1, batch_wait_s: float = 0.005, render=None
    ) -> None:
        self.model_dir = model_dir
        self.render = render
        self.prompts: list[str] = []
        self.processor = AutoProcessor.from_pretrained(model_dir)
        self.model = AutoModelForImageTextToText.from_pretrained(model_dir).eval()
        self.lock = threading.Lock()
        self.delay_s = delay_s  # latency of a remote server, outside the model lock
        self.faults: list[tuple[str, float]] = []
        self.requests = 0
        self.in_flight = self.in_flight_max = 0
        self.bodies: list[dict] = []
        self.max_batch, self.batch_wait_s = max_batch, batch_wait_s
        self.batches: list[int] = []
        self.queue: queue.Queue = queue.Queue()
        if max_batch > 1:
            threading.Thread(target=self._batch_worker, daemon=True).start()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                with server.lock:
                    server.requests += 1
                    server.bodies.append({"headers": dict(self.headers), "body": body})
                    fault = server.faults.pop(0) if server.faults else None
                    server.in_flight += 1
                    server.in_flight_max = max(server.in_flight_max, server.in_flight)
                try:
                    if fault and fault[0] == "status":
                        return self._send(int(fault[1]), b'{"error": "unavailable"}')
                    if fault and fault[0] == "hang":
                        time.sleep(fault[1])
                    if fault and fault[0] == "garbage":
                        return self._send(200, b"<html>upstream proxy error</html>")
                    if server.delay_s:
                        time.sleep(server.delay_s)
                    return self._send(200, json.dumps(server.answer(body)).encode())
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _send(self, status, data):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    # -- faults ---------------------------------------------------------------------------------------
    def fail_next(self, status: int, times: int) -> None:
        self.faults += [("status", status)] * times

    def hang_next(self, seconds: float) -> None:
        self.faults.append(("hang", seconds))

    def garbage_next(self) -> None:
        self.faults.append(("garbage", 0))

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- the model ------------------------------------------------------------------------------------
    def answer(self, body: dict) -> dict:
        if self.max_batch <= 1:
            return self.complete(body)
        done, holder = threading.Event(), {}
        self.queue.put((body, done, holder))
        done.wait()
        if "error" in holder:
            raise holder["error"]
        return holder["result"]

    def _batch_worker(self) -> None:
        while True:
            items = [self.queue.get()]
            deadline = time.monotonic() + self.batch_wait_s
            while len(items) < self.max_batch:
                try:
                    items.append(self.queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            key = lambda it: (  # noqa: E731
                int(it[0].get("max_tokens", 16)),
                bool(it[0].get("logprobs")),
                int(it[0].get("top_logprobs", 0)),
            )
            for k in {key(it) for it in items}:
                group = [it for it in items if key(it) == k]
                try:
                    results = self.complete_many([it[0] for it in group])
                    for (_, _, holder), result in zip(group, results):
                        holder["result"] = result
                except Exception as exc:  # answered as a failed request
                    for _, _, holder in group:
                        holder["error"] = exc
                self.batches.append(len(group))
                for _, done, _ in group:
                    done.set()

    def complete(self, body: dict) -> dict:
        return self.complete_many([body])[0]

    def _parse(self, body: dict) -> tuple[str, list]:
        messages, images = [], []
        for m in body["messages"]:
            if isinstance(m["content"], str):
                messages.append({"role": m["role"], "content": [{"type": "text", "text": m["content"]}]})
                continue
            parts = []
            for part in m["content"]:
                if part["type"] == "image_url":
                    data = part["image_url"]["url"].split(",", 1)[1]
                    images.append(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))
                    parts.append({"type": "image"})
                else:
                    parts.append({"type": "text", "text": part["text"]})
            messages.append({"role": m["role"], "content": parts})
        if self.render is not None:
            text = self.render(messages)
        else:
            text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        self.prompts.append(text)
        return text, images

    def complete_many(self, bodies: list[dict]) -> list[dict]:
        """Bodies with equal max_tokens / logprobs settings, answered with one left-padded generate."""
        parsed = [self._parse(b) for b in bodies]
        images = [im for _, ims in parsed for im in ims]
        tok = self.processor.tokenizer
        max_tokens = int(bodies[0].get("max_tokens", 16))
        with self.lock, torch.inference_mode():
            tok.padding_side = "left"
            inputs = self.processor(
                text=[t for t, _ in parsed], images=images or None, padding=True, return_tensors="pt"
            )
            out = self.model.generate(
                **inputs,
                max_new_tokens=max_tokens,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=tok.pad_token_id,
            )
        answers = []
        for row, body in enumerate(bodies):
            new = out.sequences[row, inputs["input_ids"].shape[1] :]
            ended = (new == tok.eos_token_id).nonzero()
            if len(ended):
                new = new[: int(ended[0]) + 1]
            choice = {
                "index": 0,
                "finish_reason": "length" if len(new) >= max_tokens else "stop",
                "message": {"role": "assistant", "content": tok.decode(new, skip_special_tokens=True)},
            }
            if body.get("logprobs"):
                k = int(body.get("top_logprobs", 0))
                content = []
                for step, token in enumerate(new):
                    logp = torch.log_softmax(out.scores[step][row].float(), dim=-1)
                    top = torch.topk(logp, min(k, logp.numel())) if k else None
                    content.append(
                        {
                            "token": tok.decode([int(token)]),
                            "logprob": float(logp[token]),
                            "top_logprobs": [
                                {"token": tok.decode([int(i)]), "logprob": float(v)}
                                for v, i in zip(top.values, top.indices)
                            ]
                            if k
                            else [],
                        }
                    )
                choice["logprobs"] = {"content": content}
            answers.append(
                {"id": "cmpl-test", "object": "chat.completion", "model": body.get("model"), "choices": [choice]}
            )
        return answers
