"""Start and stop the real local model (llama-server + SmolLM2-135M, see ../shared/LLM.md) for tests.

The binary and model come from ``scripts/build_local_llm.sh`` (cache dir ``TRAJAUDIT_LLAMA_DIR``,
default ``~/.cache/trajaudit/llama``). With ``--run-localllm`` a missing build is an ERROR, not a
skip: CI must fail loudly when the build did not happen.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

CONTEXT_TOKENS = 8192


def llama_dir() -> Path:
    """The build cache directory."""
    return Path(os.environ.get("TRAJAUDIT_LLAMA_DIR", Path.home() / ".cache" / "trajaudit" / "llama"))


def find_build() -> tuple[Path, Path]:
    """``(llama-server binary, .gguf model)``.

    Raises:
        FileNotFoundError: naming what is missing and the script that builds it.
    """
    base = llama_dir()
    server = base / "bin" / "llama-server"
    models = sorted((base / "models").glob("*.gguf")) if (base / "models").is_dir() else []
    if not server.is_file() or not models:
        raise FileNotFoundError(f"local LLM not built in {base} (server: {server.is_file()}, model: {bool(models)}); "
                                "run scripts/build_local_llm.sh first")
    return server, models[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalLLM:
    """A running llama-server; ``url`` is its ``/v1`` base URL. Stop it with :meth:`stop`."""

    def __init__(self, log_path: Path) -> None:
        server, model = find_build()
        self.model_path = model
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(server), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port),
             "-c", str(CONTEXT_TOKENS), "-t", "2", "--no-webui"],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}; log: {log_path}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if json.loads(r.read() or b"{}").get("status") == "ok":
                        return
            except OSError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"llama-server not healthy after 120 s; log: {log_path}")

    def stop(self) -> None:
        """Terminate the server by its PID (kill after 10 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
