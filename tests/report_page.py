"""Reading the data an HTML report embeds (the page's script draws everything from it)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from typing import Any

_BLOCK = re.compile(r'<script type="application/(json|gzip-base64)" id="([\w-]+)"[^>]*>(.*?)</script>', re.S)


def blocks(html: str) -> dict[str, str]:
    """``{id: text}`` of the page's data blocks (compressed chunks decoded to JSON text)."""
    out = {}
    for kind, bid, text in _BLOCK.findall(html):
        out[bid] = gzip.decompress(base64.b64decode(text)).decode("utf-8") if kind == "gzip-base64" else text
    return out


def runs(html: str) -> list[dict[str, Any]]:
    """The runs table's rows (one summary per run)."""
    return json.loads(blocks(html)["runs-data"])


def details(html: str) -> list[dict[str, Any]]:
    """Every run's detail, in report order (plain per-run blocks or compressed chunks)."""
    b = blocks(html)
    if "d0" in b or not any(k.startswith("c") for k in b):
        return [json.loads(b[f"d{i}"]) for i in range(len([k for k in b if re.fullmatch(r"d\d+", k)]))]
    out: list[dict[str, Any]] = []
    for k in range(len([k for k in b if re.fullmatch(r"c\d+", k)])):
        out.extend(json.loads(b[f"c{k}"]))
    return out
