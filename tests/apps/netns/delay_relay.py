#!/usr/bin/env python3
"""A TCP relay that stands for a slow or stalled link (our kernels lack tc netem).

    delay_relay.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT [--delay-ms N]

Every connection to LISTEN_HOST:LISTEN_PORT gets one to TARGET_HOST:TARGET_PORT,
and every byte goes on N ms after it arrived, in both directions, in order (a
one-way delay, not a bandwidth limit). A peer's close is passed on after the
same delay.

SIGUSR1 stalls the link: nothing more is written to either side and no new
connection reaches the target, but every connection stays open (what arrives
meanwhile is kept). SIGUSR2 resumes: what was kept goes on at once, in order.
SIGTERM ends the relay. Prints "relay listening" once it accepts connections.
"""
import argparse
import asyncio
import signal
import sys


async def pump(reader, writer, delay_s, running, chunks_held):
    """Copies reader to writer, each chunk delay_s after it was read."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def read():
        try:
            while True:
                data = await reader.read(65536)
                queue.put_nowait((loop.time() + delay_s, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            queue.put_nowait((loop.time(), b""))

    async def write():
        try:
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not running.is_set():
                    chunks_held[0] += 1
                    await running.wait()
                    chunks_held[0] -= 1
                if not data:
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    reading = asyncio.ensure_future(read())
    await write()
    reading.cancel()


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("listen_host")
    p.add_argument("listen_port", type=int)
    p.add_argument("target_host")
    p.add_argument("target_port", type=int)
    p.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay of every byte (default 0)")
    args = p.parse_args()
    delay_s = args.delay_ms / 1000.0
    running = asyncio.Event()
    running.set()
    chunks_held = [0]
    stop = asyncio.Event()

    loop = asyncio.get_running_loop()

    def stall():
        running.clear()
        print("relay stalled", flush=True)

    def resume():
        running.set()
        print(f"relay resumed ({chunks_held[0]} held chunk(s) go on)", flush=True)

    loop.add_signal_handler(signal.SIGUSR1, stall)
    loop.add_signal_handler(signal.SIGUSR2, resume)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    async def on_client(client_reader, client_writer):
        await running.wait()  # a stalled link reaches nobody new
        try:
            target_reader, target_writer = await asyncio.open_connection(args.target_host, args.target_port)
        except OSError as e:
            print(f"relay: cannot reach {args.target_host}:{args.target_port}: {e}", flush=True)
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, target_writer, delay_s, running, chunks_held),
                             pump(target_reader, client_writer, delay_s, running, chunks_held))

    server = await asyncio.start_server(on_client, args.listen_host, args.listen_port, reuse_address=True)
    print(f"relay listening on {args.listen_host}:{args.listen_port} -> {args.target_host}:{args.target_port}, "
          f"{args.delay_ms:g} ms each way", flush=True)
    async with server:
        await stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
