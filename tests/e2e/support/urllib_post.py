#!/usr/bin/env python3
"""POSTs a chat request with a message of SIZE_MIB MiB to URL with Python's urllib (which
sends the whole body before it reads the answer) and prints {"status":..,"body":..} as
JSON, or {"error": "..."} when no answer arrived (a reset connection, a broken pipe).

usage: urllib_post.py URL API_KEY SIZE_MIB"""
import json
import sys
import urllib.error
import urllib.request

url, key, size_mib = sys.argv[1], sys.argv[2], float(sys.argv[3])
content = "x" * int(size_mib * 1024 * 1024)
body = json.dumps({"model": "qwen", "messages": [{"role": "user", "content": content}]}).encode()
req = urllib.request.Request(url, data=body, method="POST", headers={
    "Content-Type": "application/json", "Authorization": "Bearer " + key})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        print(json.dumps({"status": r.status, "body": r.read().decode()}))
except urllib.error.HTTPError as e:
    print(json.dumps({"status": e.code, "body": e.read().decode()}))
except Exception as e:  # noqa: BLE001 - the test reports whatever went wrong
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
