#!/usr/bin/env python3
"""Checks that every informer cache of the operator equals the API server.

Usage:
  informer_check.py --debug-url http://IP:8081/debug/informers
                    (--kubeconfig FILE | --api URL --token TOKEN) [--timeout 60]

The operator serves, on its health address, GET /debug/informers: for each
informer its collection (path, namespace, selectors), whether it synced, and
its objects as {key: metadata.resourceVersion}. This lists the same
collection from the API server with the same selectors and compares key sets
and resourceVersions. Caches are eventually consistent, so it retries until
they are equal or the timeout passes; then it prints, per informer, what the
cache misses, holds in excess or holds stale, and exits 1. On success it
prints one summary line and exits 0.

With --kubeconfig, TLS is verified with the kubeconfig's CA (unless it says
insecure-skip-tls-verify); with --api, TLS is not verified (the emulator's
CA is self-signed and made at start).
"""
import argparse
import base64
import json
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

MAX_LINES = 10  # detail lines per informer
PAGE = 500


def _ssl_context(ca_data):
    """Verifies with the PEM CA `ca_data`; None: no verification."""
    if ca_data is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    return ssl.create_default_context(cadata=ca_data)


def _get_json(url, token=None, ctx=None):
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, headers=headers)
    kwargs = {"context": ctx} if url.startswith("https:") else {}
    with urllib.request.urlopen(req, timeout=20, **kwargs) as resp:
        return json.loads(resp.read())


def _list(api_url, informer, token, ctx):
    """{key: resourceVersion} of the informer's collection on the server, and the list's RV."""
    objects, cont, rv = {}, "", ""
    while True:
        query = {"limit": str(PAGE)}
        for param, field in (("labelSelector", "labelSelector"), ("fieldSelector", "fieldSelector")):
            if informer.get(field):
                query[param] = informer[field]
        if cont:
            query["continue"] = cont
        page = _get_json(api_url.rstrip("/") + informer["path"] + "?" +
                         urllib.parse.urlencode(query), token, ctx)
        meta = page.get("metadata") or {}
        rv = rv or meta.get("resourceVersion", "")
        for item in page.get("items") or []:
            m = item.get("metadata") or {}
            key = m["namespace"] + "/" + m["name"] if m.get("namespace") else m["name"]
            objects[key] = m.get("resourceVersion", "")
        cont = meta.get("continue", "")
        if not cont:
            return objects, rv


def _diff(informer, server, server_rv):
    """Lines describing how one cache differs from the server; [] when equal."""
    cache = informer.get("objects") or {}
    missing = sorted(k for k in server if k not in cache)
    extra = sorted(k for k in cache if k not in server)
    stale = sorted(k for k in cache if k in server and cache[k] != server[k])
    if informer.get("synced") and not (missing or extra or stale):
        return []
    head = "informer %s (cache rv %s, server rv %s):%s %d missing, %d extra, %d stale" % (
        json.dumps(informer.get("name")), informer.get("resourceVersion") or "-",
        server_rv or "-", "" if informer.get("synced") else " NOT SYNCED,",
        len(missing), len(extra), len(stale))
    details = (["  missing %s (server rv %s)" % (k, server[k]) for k in missing] +
               ["  extra %s (cache rv %s)" % (k, cache[k]) for k in extra] +
               ["  stale %s: cache rv %s, server rv %s" % (k, cache[k], server[k]) for k in stale])
    if len(details) > MAX_LINES:
        details = details[:MAX_LINES - 1] + ["  ... and %d more" % (len(details) - MAX_LINES + 1)]
    return [head] + details


def _compare_once(debug_url, api_url, token, ctx):
    """(problem lines, number of caches, number of cached objects)."""
    informers = _get_json(debug_url)
    problems = []
    for informer in informers:
        try:
            server, server_rv = _list(api_url, informer, token, ctx)
        except (urllib.error.URLError, OSError, ValueError) as e:
            problems.append("informer %s: cannot list %s: %s" % (
                json.dumps(informer.get("name")), informer.get("path"), e))
            continue
        problems += _diff(informer, server, server_rv)
    objects = sum(len(i.get("objects") or {}) for i in informers)
    return problems, len(informers), objects


def compare(debug_url, api_url, token, timeout_s, ca_data=None):
    """Compares the operator's caches (debug_url: its /debug/informers) with the
    API server at api_url (bearer `token`; TLS verified with the PEM CA
    `ca_data`, or not at all when None), retrying until equal or timeout_s.

    Returns (ok, lines): on success one summary line; on failure what differs,
    per informer (at most MAX_LINES detail lines each).
    """
    ctx = _ssl_context(ca_data)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            problems, caches, objects = _compare_once(debug_url, api_url, token, ctx)
        except (urllib.error.URLError, OSError, ValueError) as e:
            problems, caches, objects = ["cannot read %s: %s" % (debug_url, e)], 0, 0
        if not problems:
            return True, ["informers: %d caches, %d objects, equal to the server" % (caches, objects)]
        if time.monotonic() >= deadline:
            return False, problems
        time.sleep(1)


def _from_kubeconfig(path):
    """(api_url, token, ca_data) of the kubeconfig's current context."""
    cfg = yaml.safe_load(open(path))

    def named(section, name):
        for entry in cfg.get(section) or []:
            if entry.get("name") == name:
                return entry
        raise ValueError("%s: no %s named %r" % (path, section, name))

    context = named("contexts", cfg["current-context"])["context"]
    cluster = named("clusters", context["cluster"])["cluster"]
    user = named("users", context["user"])["user"] if context.get("user") else {}
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = open(user["tokenFile"]).read().strip()
    ca_data = None
    if not cluster.get("insecure-skip-tls-verify"):
        if cluster.get("certificate-authority-data"):
            ca_data = base64.b64decode(cluster["certificate-authority-data"]).decode()
        elif cluster.get("certificate-authority"):
            ca_data = open(cluster["certificate-authority"]).read()
    return cluster["server"], token, ca_data


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--debug-url", required=True,
                        help="the operator's /debug/informers URL")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--kubeconfig", help="server, token and CA from this kubeconfig")
    source.add_argument("--api", help="API server URL (TLS not verified)")
    parser.add_argument("--token", help="bearer token for --api")
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds to wait for the caches to equal the server")
    args = parser.parse_args(argv)
    if args.kubeconfig:
        api_url, token, ca_data = _from_kubeconfig(args.kubeconfig)
    else:
        api_url, token, ca_data = args.api, args.token, None
    ok, lines = compare(args.debug_url, api_url, token, args.timeout, ca_data=ca_data)
    print("\n".join(lines), file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
