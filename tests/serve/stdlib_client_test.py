#!/usr/bin/env python3
"""A second client of `llmrt serve`, on Python's standard library only, and the load test.

    stdlib_client_test.py BASE_URL API_KEY MODEL SERVER_PID LOAD_SECONDS CLIENTS

1. completions, chat and a streamed completion with http.client (SSE parsed by hand);
2. CLIENTS concurrent streaming clients for LOAD_SECONDS, a third of them hanging up mid-stream
   at random: no 5xx and no broken stream, every KV block back afterwards, the server's RSS flat
   (the second half of the run may not grow it by more than 10% + 16 MiB over the first half's peak).
"""
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

base, key, model, pid, seconds, clients = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
url = urllib.parse.urlparse(base)
HEADERS = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
failures = []


def conn(timeout=120):
    return http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)


def post(path, body):
    c = conn()
    c.request("POST", path, json.dumps(body), HEADERS)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


def metrics():
    c = conn()
    c.request("GET", "/metrics", headers=HEADERS)
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def gauge(m, name):
    return next((v for k, v in m.items() if k.startswith(name + "{")), None)


def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"))
    if not cond:
        failures.append(name)


# 1. The API by hand.
st, body = post("/v1/completions", {"model": model, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})
check("completion", st == 200 and body["usage"]["completion_tokens"] == 8, body)
greedy = body["choices"][0]["text"] if st == 200 else None
st, chat = post("/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
check("chat", st == 200 and chat["choices"][0]["message"]["role"] == "assistant", chat)


def stream(body, hang_up_after=None):
    """Returns (status, text, done, error); hangs up after `hang_up_after` events when set."""
    c = conn()
    c.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)), HEADERS)
    r = c.getresponse()
    if r.status != 200:
        data = r.read()
        c.close()
        return r.status, "", False, data
    text, done, events = "", False, 0
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                return r.status, text, False, f"not an SSE event: {event[:80]!r}"
            payload = event[6:]
            if payload == b"[DONE]":
                done = True
                continue
            obj = json.loads(payload)
            if "error" in obj:
                return r.status, text, False, obj
            if obj["choices"]:
                text += obj["choices"][0]["text"]
            events += 1
            if hang_up_after is not None and events >= hang_up_after:
                c.sock.close()
                c.close()
                return r.status, text, False, None
    c.close()
    return r.status, text, done, None


st, text, done, err = stream({"model": model, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0})
check("stream", st == 200 and done and err is None and text == greedy, (st, text, greedy, err))

# 2. Load with disconnects.
stop_at = time.time() + seconds
counts = {"done": 0, "hung_up": 0, "429": 0}
errors = []
lock = threading.Lock()
rss_first, rss_second = [], []


def client(i):
    rng = random.Random(i)
    while time.time() < stop_at:
        body = {"model": model, "prompt": rng.choice(["Once upon a time", "The cat", "A little girl named Lily"]),
                "max_tokens": rng.randint(1, 48), "temperature": rng.choice([0, 0.8]), "seed": rng.randint(0, 1000)}
        hang = rng.randint(1, 6) if rng.random() < 0.33 else None
        try:
            st, _, done, err = stream(body, hang)
        except Exception as e:  # a transport error on our side is a failure too
            st, done, err = -1, False, repr(e)
        with lock:
            if st == 429:
                counts["429"] += 1
            elif st != 200 or err is not None or (hang is None and not done):
                errors.append((st, err))
            elif hang is None:
                counts["done"] += 1
            else:
                counts["hung_up"] += 1


def sample_rss():
    half = time.time() + seconds / 2
    while time.time() < stop_at:
        (rss_first if time.time() < half else rss_second).append(rss_kib())
        time.sleep(0.5)


threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
sampler = threading.Thread(target=sample_rss)
for t in threads + [sampler]:
    t.start()
for t in threads + [sampler]:
    t.join()
print(f"load: {clients} clients for {seconds:.0f}s: {counts['done']} complete streams, {counts['hung_up']} hang-ups, "
      f"{counts['429']} queue-full answers, {len(errors)} errors")
check("no server errors under load", not errors, errors[:5])
check("streams completed", counts["done"] > clients, counts)

idle = False
for _ in range(400):
    m = metrics()
    if gauge(m, "llmrt:num_requests_running") == 0 and gauge(m, "llmrt:num_requests_waiting") == 0 and \
            gauge(m, "llmrt:kv_cache_usage_perc") == 0:
        idle = True
        break
    time.sleep(0.05)
check("every KV block returned", idle, {k: v for k, v in m.items() if "num_requests" in k or "usage" in k})
check("no 5xx responses", not any(k.startswith('llmrt:http_responses_total{code="5') for k in m), m)
aborts = next((v for k, v in m.items() if k.startswith("llmrt:request_success_total") and 'abort' in k), 0)
check("hang-ups were cancelled", aborts >= 1, aborts)
if rss_first and rss_second:
    first, second = max(rss_first), max(rss_second)
    print(f"rss: first half peak {first / 1024:.1f} MiB, second half peak {second / 1024:.1f} MiB")
    check("RSS flat", second <= first * 1.10 + 16 * 1024, (first, second))

print("stdlib client: all passed" if not failures else f"stdlib client: {len(failures)} failed: {failures}")
sys.exit(1 if failures else 0)
