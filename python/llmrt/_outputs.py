"""RequestOutput and CompletionOutput (tensorrt_llm's names and fields), the progress bar, and
the streaming handle generate_async returns."""
from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, Dict, List, NamedTuple, Optional

__all__ = ["Logprob", "CompletionOutput", "RequestOutput", "RequestError"]


class RequestError(RuntimeError):
    """A request failed alone (invalid for this model, or it cannot fit the KV cache)."""


class Logprob(NamedTuple):
    """One token's log-probability and its rank among the alternatives (1 = most likely)."""
    logprob: float
    rank: Optional[int] = None


class CompletionOutput:
    """One generated sequence: index, text, token_ids, finish_reason ("stop", "length",
    "cancelled"; None while running), logprobs (per token, {token id: Logprob} of the chosen token
    and the top alternatives, when SamplingParams.logprobs is set), cumulative_logprob,
    generation_logits (numpy [tokens, vocab], when asked), and for streaming text_diff and
    token_ids_diff (what the last piece added)."""

    __slots__ = ("index", "text", "token_ids", "finish_reason", "stop_reason", "logprobs", "cumulative_logprob",
                 "generation_logits", "text_diff", "token_ids_diff", "_detokenize")

    def __init__(self, index: int, detokenize: bool = True):
        self.index = index
        self.text = ""
        self.token_ids: List[int] = []
        self.finish_reason: Optional[str] = None
        self.stop_reason: Optional[Any] = None
        self.logprobs: Optional[List[Dict[int, Logprob]]] = None
        self.cumulative_logprob: Optional[float] = None
        self.generation_logits = None
        self.text_diff = ""
        self.token_ids_diff: List[int] = []
        self._detokenize = detokenize

    @property
    def length(self) -> int:
        return len(self.token_ids)

    def __repr__(self) -> str:
        return (f"CompletionOutput(index={self.index}, text={self.text!r}, token_ids={self.token_ids}, "
                f"finish_reason={self.finish_reason!r})")

    def _set_final(self, d: Dict[str, Any]) -> None:
        self.text = d["text"] if self._detokenize else ""
        self.token_ids = list(d["token_ids"])
        self.finish_reason = d["finish_reason"] or None
        if d["logprobs"]:
            self.logprobs = []
            total = 0.0
            for chosen, lp, top in d["logprobs"]:
                entry = {t: Logprob(p, r + 1) for r, (t, p) in enumerate(top)}
                rank = next((r + 1 for r, (t, _) in enumerate(top) if t == chosen), None)
                entry[chosen] = Logprob(lp, rank)
                self.logprobs.append(entry)
                total += lp
            self.cumulative_logprob = total
        self.generation_logits = d["generation_logits"]


class RequestOutput:
    """The output of one prompt (tensorrt_llm.RequestOutput): request_id, prompt,
    prompt_token_ids, outputs (CompletionOutput per sample), context_logits (numpy [prompt
    tokens, vocab], when asked), cached_tokens (prompt tokens whose KV came from the cache),
    finished. From generate_async it is also the handle: result(), aresult(), `await`, and
    iteration (sync or `async for`) over its streamed states."""

    def __init__(self, request: Any, prompt: Optional[str], prompt_token_ids: List[int], n: int,
                 detokenize: bool = True, streaming: bool = False):
        self._request = request
        self.request_id: int = request.id if request is not None else -1
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.outputs = [CompletionOutput(i, detokenize) for i in range(n)]
        self.context_logits = None
        self.cached_tokens = 0
        self.time_to_first_token_s = 0.0
        self.total_time_s = 0.0
        self.finished = False
        self._streaming = streaming
        self._error: Optional[BaseException] = None

    def __repr__(self) -> str:
        return (f"RequestOutput(request_id={self.request_id}, prompt={self.prompt!r}, "
                f"outputs={self.outputs}, finished={self.finished})")

    # ---- filling in ------------------------------------------------------------------------
    def _set_final(self, d: Dict[str, Any]) -> None:
        if d["status"] is not None:
            code, message = d["status"]
            self._error = (ValueError if code in ("InvalidArgument", "OutOfRange") else RequestError)(message)
        if d["prompt"] and self.prompt is None:
            self.prompt = d["prompt"]
        self.prompt_token_ids = list(d["prompt_token_ids"])
        for c, o in zip(self.outputs, d["outputs"]):
            c._set_final(o)
            c.text_diff, c.token_ids_diff = "", []
        self.context_logits = d["context_logits"]
        self.cached_tokens = d["cached_tokens"]
        self.time_to_first_token_s = d["time_to_first_token_s"]
        self.total_time_s = d["total_time_s"]
        self.finished = True

    def _apply_piece(self, piece: tuple) -> None:
        index, token_ids, text, finish = piece
        for c in self.outputs:
            c.text_diff, c.token_ids_diff = "", []
        c = self.outputs[index]
        c.token_ids.extend(token_ids)
        c.token_ids_diff = list(token_ids)
        if c._detokenize:
            c.text += text
            c.text_diff = text
        if finish:
            c.finish_reason = finish

    def _raise_if_failed(self) -> "RequestOutput":
        if self._error is not None:
            raise self._error
        return self

    # ---- the generate_async handle ---------------------------------------------------------
    def result(self, timeout: Optional[float] = None) -> "RequestOutput":
        """Blocks until the request ends (or raises TimeoutError after `timeout` seconds)."""
        if not self.finished:
            if not self._request.wait(timeout):
                raise TimeoutError(f"request {self.request_id} did not finish within {timeout} s")
            self._set_final(self._request.result())
        return self._raise_if_failed()

    async def aresult(self) -> "RequestOutput":
        """Awaits the end of the request without blocking the event loop."""
        if not self.finished:
            loop = asyncio.get_running_loop()
            d = await loop.run_in_executor(None, self._request.result)
            self._set_final(d)
        return self._raise_if_failed()

    def __await__(self):
        return self.aresult().__await__()

    def abort(self) -> None:
        """Cancels the request: its sequences end with finish_reason "cancelled"."""
        if self._request is not None:
            self._request.abort()

    def _next_state(self, timeout: Optional[float]) -> bool:
        """Applies the next streamed piece; False once the request has ended (final state set)."""
        piece = self._request.next(timeout)
        if piece is None:
            self._set_final(self._request.result())
            return False
        if piece is False:
            raise TimeoutError(f"request {self.request_id}: no token within {timeout} s")
        self._apply_piece(piece)
        return True

    def __iter__(self):
        if not self._streaming:
            yield self.result()
            return
        while not self.finished:
            if self._next_state(None):
                yield self
        self._raise_if_failed()

    def __aiter__(self):
        return self._async_states()

    async def _async_states(self):
        loop = asyncio.get_running_loop()
        if not self._streaming:
            yield await self.aresult()
            return
        while not self.finished:
            piece = await loop.run_in_executor(None, self._request.next, None)
            if piece is None:
                self._set_final(await loop.run_in_executor(None, self._request.result))
                break
            self._apply_piece(piece)
            yield self
        self._raise_if_failed()


class ProgressBar:
    """A tqdm-style bar on stderr: `Processed prompts: 37%|#####     | 3/8 [00:01<00:02, 2.9it/s]`."""

    def __init__(self, total: int, enabled: bool, desc: str = "Processed prompts", stream: Any = None):
        self.total, self.n, self.desc = total, 0, desc
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and total > 0
        self.start = time.monotonic()
        self.last = 0.0
        if self.enabled:
            self._draw()

    def update(self, k: int = 1) -> None:
        self.n += k
        now = time.monotonic()
        if self.enabled and (self.n == self.total or now - self.last >= 0.1):
            self.last = now
            self._draw()

    def close(self) -> None:
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        elapsed = time.monotonic() - self.start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        left = (self.total - self.n) / rate if rate > 0 else 0.0
        frac = self.n / self.total
        bar = "#" * int(frac * 20)
        fmt = lambda s: f"{int(s) // 60:02d}:{int(s) % 60:02d}"  # noqa: E731
        self.stream.write(f"\r{self.desc}: {frac:4.0%}|{bar:<20}| {self.n}/{self.total} "
                          f"[{fmt(elapsed)}<{fmt(left)}, {rate:.2f}it/s]")
        self.stream.flush()
