"""Progress notifications from long tools (run_verifier, reverify) while they run.

The verifier reports progress from whatever thread reads its worker's output (a pump
thread, not one anyio started), where ``anyio.from_thread.run`` cannot find the event
loop and raises. So the callback only hands each event to the event loop through the
loop's token (``from_thread.run_sync(..., token=...)`` works from any thread) into a
memory stream; a task on the loop sends them to the client while the blocking work runs
on a worker thread. A slow client never stalls the work: when the buffer is full an event
is dropped (the next one carries the newer count), and the final events are flushed before
the result is returned.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context

T = TypeVar("T")
ProgressCallback = Callable[[float, float, str], None]  # (done, total, message)
BUFFER = 256


async def run_with_progress(ctx: Context, work: Callable[[ProgressCallback], T], cancel: threading.Event | None = None) -> T:
    """Run ``work(progress)`` on a worker thread; every ``progress(done, total, message)`` call,
    from any thread, becomes an MCP progress notification during the run. When the request
    is cancelled (the client's ``notifications/cancelled``, or the session ends) ``cancel``
    is set at once: the work sees it and stops its processes (``verifiers.launch.runner``);
    the call does not wait for the thread."""
    token = anyio.lowlevel.current_token()
    send, receive = anyio.create_memory_object_stream[tuple[float, float, str]](BUFFER)

    def progress(done: float, total: float, message: str) -> None:
        try:
            anyio.from_thread.run_sync(send.send_nowait, (float(done), float(total), str(message)[:500]), token=token)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError, RuntimeError):
            pass  # best effort: a full buffer or a finished call drops the event, never the run

    async def forward() -> None:
        async with receive:
            async for done, total, message in receive:
                try:
                    await ctx.report_progress(done, total, message)
                except Exception:  # noqa: BLE001 - a client that went away must not fail the tool
                    pass

    result: Any = None
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(forward)
        try:
            result = await anyio.to_thread.run_sync(lambda: work(progress), abandon_on_cancel=cancel is not None)
        except anyio.get_cancelled_exc_class():
            if cancel is not None:
                cancel.set()
            raise
        except Exception as exc:  # noqa: BLE001 - re-raised as itself below, not as an exception group
            failure = exc
        finally:
            send.close()
    if failure is not None:
        raise failure
    return result
