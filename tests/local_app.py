"""Test support: the app's Blocks launched in this process on a free loopback port, without blocking, and a port
that nothing listens on (tests import it by module name, as tests/ is on sys.path: `from local_app import ...`)."""

from __future__ import annotations

import socket

import gradio as gr


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def launch_local(demo: gr.Blocks, host: str = "127.0.0.1") -> str:
    """Launch `demo` on a free port of `host` in background threads; its URL."""
    demo.launch(server_name=host, server_port=free_port(host), prevent_thread_lock=True, quiet=True, share=False)
    return demo.local_url
