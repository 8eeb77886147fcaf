"""The console script's first code. It imports nothing heavy before it can turn Ctrl-C or SIGTERM into a
quiet exit 130: an interrupt while click, rich or LibCST are still importing would otherwise print a
traceback."""

from __future__ import annotations


def _as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    import signal

    from npu_port.transpiler.core.exit_codes import exit_interrupted

    try:
        signal.signal(signal.SIGTERM, _as_interrupt)
        from npu_port.transpiler.cli import main as run

        run()
    except KeyboardInterrupt:
        exit_interrupted()


if __name__ == "__main__":
    main()
