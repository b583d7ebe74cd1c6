"""Run the server with uvicorn: in the foreground (`tailor serve`) or on a thread (the window, tests)."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import threading
from collections.abc import Callable

import uvicorn

from app.server.config import ServerConfig
from app.server.connections import ConnectionLimits, limited_protocol
from app.server.engine_port import EnginePort
from app.server.model_router import ModelRouter, SingleModel
from app.server.openai_app import create_app
from engine.interface import Engine
from engine.protocol import ModelInfo

log = logging.getLogger(__name__)


class ServerStartError(OSError):
    """The server could not listen (the port is taken, the address is not this machine's...)."""


def bind_socket(config: ServerConfig, port: int | None = None, option: str | None = None) -> socket.socket:
    """A listening socket for the config's host and `port` (None: the config's; 0: a free one); `option` is the
    command-line option that set the port, named in the error."""
    port = config.port if port is None else port
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio turns Nagle off (TCP_NODELAY) only on connections whose socket says
    # TCP, and with it on, a response's body waited for the client's delayed ACK of its headers: 40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        which = f" ({option})" if option else ""
        hint = " Is Ollama itself running there? Stop it, or pick another --ollama-port." \
            if option == "--ollama-port" and exc.errno == errno.EADDRINUSE else ""
        raise ServerStartError(f"Cannot listen on {config.host}:{port}{which}: {exc.strerror or exc}.{hint}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class ServerThread:
    """An OpenAI-compatible server on a background thread.

    Args:
        client: the engine to serve (an EngineClient, possibly shared with the window).
        model_info: the loaded model, or None while there is none.
        config: where to listen and who may connect (checked here).
        router: the models it serves; None: the one model of `client` (SingleModel).
    """

    def __init__(self, client: Engine | None, model_info: Callable[[], ModelInfo | None] | None,
                 config: ServerConfig, router: ModelRouter | None = None):
        config.check()
        self.config = config
        self._socks = bind_sockets(config)
        self.port = self._socks[0].getsockname()[1]
        # Where Ollama's clients reach it too (--ollama-port); None: only on `port`.
        self.ollama_port: int | None = self._socks[1].getsockname()[1] if len(self._socks) > 1 else None
        self.engine: EnginePort | None = None
        if router is None:
            assert client is not None and model_info is not None
            self.engine = EnginePort(client, model_info, config.parallel, config.queue_timeout_s)
            router = SingleModel(self.engine)
        self.router = router
        self._server = uvicorn.Server(_uvicorn_config(create_app(router, config), config))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return _url(self.config, self.port) + "/v1"

    @property
    def ollama_url(self) -> str:
        """The Ollama port's address (Ollama's clients take a host without a path); the main port's without one."""
        return _url(self.config, self.port if self.ollama_port is None else self.ollama_port)

    def start(self) -> ServerThread:
        """Start serving; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self._run, name="tailor-server", daemon=True)
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            self._thread.join(0.01)
        if not self._server.started:
            raise ServerStartError("The server stopped while starting; see the log.")
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, end open streams (their replies are cancelled) and close the socket."""
        self._server.should_exit = True
        self._server.force_exit = True  # do not wait for streaming replies to finish
        if self._thread is not None:
            self._thread.join(timeout)
        for sock in self._socks:
            sock.close()
        self.router.shutdown()

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=self._socks))

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(client: Engine | None, model_info: Callable[[], ModelInfo | None] | None, config: ServerConfig,
                  on_ready: Callable[[str], None] | None = None, router: ModelRouter | None = None,
                  on_ollama_ready: Callable[[str], None] | None = None) -> None:
    """Serve in the foreground until Ctrl+C (uvicorn handles the signals); `router` as ServerThread's;
    `on_ready` gets the OpenAI base URL, `on_ollama_ready` the Ollama port's address where there is one."""
    config.check()
    socks = bind_sockets(config)
    if router is None:
        assert client is not None and model_info is not None
        router = SingleModel(EnginePort(client, model_info, config.parallel, config.queue_timeout_s))
    server = uvicorn.Server(_uvicorn_config(create_app(router, config), config))
    if on_ready is not None:
        on_ready(_url(config, socks[0].getsockname()[1]) + "/v1")
    if on_ollama_ready is not None and len(socks) > 1:
        on_ollama_ready(_url(config, socks[1].getsockname()[1]))
    try:
        asyncio.run(server.serve(sockets=socks))
    finally:
        for sock in socks:
            sock.close()
        router.shutdown()


def bind_sockets(config: ServerConfig) -> list[socket.socket]:
    """The server's listening sockets: its port, and the Ollama port where the config has one."""
    sockets = [bind_socket(config)]
    if config.ollama_port is not None:
        try:
            sockets.append(bind_socket(config, config.ollama_port, "--ollama-port"))
        except ServerStartError:
            sockets[0].close()
            raise
    return sockets


def _url(config: ServerConfig, port: int) -> str:
    host = f"[{config.host}]" if ":" in config.host else config.host
    return f"http://{host}:{port}"


def _uvicorn_config(app: object, config: ServerConfig) -> uvicorn.Config:
    # uvicorn's own access log and lifespan are not used; errors go to Tailor's log. The h11
    # protocol is always the one (never httptools), with the header deadline and connection cap.
    protocol = limited_protocol(ConnectionLimits(config.header_timeout_s, config.max_connections))
    return uvicorn.Config(
        app, http=protocol, ws="none", lifespan="off", access_log=False, log_config=None, timeout_graceful_shutdown=2,
    )
