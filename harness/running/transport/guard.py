"""The remote guard: the program every transport runs its command under on the target.

This whole module is the program: it is sent as `python -c <GUARD_SOURCE> DEADLINE_S ARGV...`
(so it imports the standard library only). It starts ARGV in its own process group and feeds it
the framed stdin: a 4-byte big-endian length, then that many bytes for ARGV's stdin; a zero
length closes ARGV's stdin. EOF on the guard's stdin at any point means the caller is gone, and
DEADLINE_S seconds after the guard started means the caller may be unreachable (a partition the
target's sshd has not noticed): either way the guard kills ARGV's process group (SIGTERM, SIGKILL
5 s later). Exit status: ARGV's (128 + signal number when a signal ended it), or
GUARD_STOPPED_EXIT / GUARD_DEADLINE_EXIT when the guard stopped it.
"""

import contextlib
import os
import queue as queue_module
import signal
import struct
import subprocess
import sys
import threading

GUARD_STOPPED_EXIT = 253  # the guard's exit status when it stopped the job on EOF
GUARD_DEADLINE_EXIT = 254  # ... and when it stopped the job at its deadline
STOP_WAIT_S = 5.0  # between SIGTERM and SIGKILL


def read_exact(count):
    """`count` bytes of the guard's stdin, or None at EOF."""
    data = b""
    while len(data) < count:
        chunk = os.read(0, count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class Job:
    """ARGV in its own process group, and the one stop it may get (EOF or the deadline)."""

    def __init__(self, child):
        self.child = child
        self.finished = threading.Event()
        self.stopped_with = []  # the guard's exit status, once it has stopped the job
        self.stopping = threading.Lock()

    def kill_group(self, sig):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.child.pid, sig)

    def stop(self, exit_status):
        with self.stopping:
            if self.finished.is_set() or self.stopped_with:
                return
            self.stopped_with.append(exit_status)
        self.kill_group(signal.SIGTERM)
        try:
            self.child.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill_group(signal.SIGKILL)

    def wait(self):
        """ARGV's exit status; then its group's stragglers (worker processes) are killed."""
        status = self.child.wait()
        with self.stopping:
            self.finished.set()
        self.kill_group(signal.SIGKILL)
        return status

    def feed(self, queue):
        """Write queued chunks to ARGV's stdin: a writer apart from the reader, so the guard's
        stdin is read to its EOF even if ARGV stops reading."""
        sink = self.child.stdin
        while (data := queue.get()) is not None:
            view = memoryview(data)
            try:
                while view:  # a raw pipe may take part of a write
                    view = view[sink.write(view) :]
            except BrokenPipeError:
                pass
        with contextlib.suppress(BrokenPipeError):
            sink.close()

    def pump(self):
        """Unframe the guard's stdin into ARGV's; at its EOF the caller is gone: stop the job."""
        queue = queue_module.SimpleQueue()
        threading.Thread(target=self.feed, args=(queue,), daemon=True).start()
        payload_open = True
        while True:
            header = read_exact(4)
            if header is None:
                break
            (length,) = struct.unpack(">I", header)
            data = read_exact(length) if length else b""
            if data is None:
                break
            if payload_open:
                queue.put(data if length else None)
                payload_open = length > 0
        if payload_open:
            queue.put(None)
        self.stop(GUARD_STOPPED_EXIT)


def start(argv):
    """ARGV started in a session of its own, or exit 127 saying why not."""
    try:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, bufsize=0, start_new_session=True)
    except OSError as exc:
        print(f"kernelgap guard: cannot start {argv[0]!r}: {exc}", file=sys.stderr)
        sys.exit(127)


def finish(job, status, deadline_s):
    """Exit with ARGV's status, or the guard's when it stopped the job (saying so at a deadline;
    never blocking on a stderr nobody drains)."""
    if job.stopped_with == [GUARD_DEADLINE_EXIT]:
        with contextlib.suppress(OSError):
            os.set_blocking(2, False)
            os.write(
                2, f"kernelgap guard: stopped the job at its {deadline_s:g} s deadline\n".encode()
            )
    sys.stdout.flush()
    sys.stderr.flush()
    if job.stopped_with:
        os._exit(job.stopped_with[0])
    os._exit(status if status >= 0 else 128 - status)


def main():
    if len(sys.argv) < 3:
        print("kernelgap guard: usage: DEADLINE_S COMMAND [ARG...]", file=sys.stderr)
        sys.exit(127)
    deadline_s = float(sys.argv[1])
    job = Job(start(sys.argv[2:]))
    threading.Thread(target=job.pump, daemon=True).start()
    deadline = threading.Timer(deadline_s, job.stop, args=(GUARD_DEADLINE_EXIT,))
    deadline.daemon = True
    deadline.start()
    finish(job, job.wait(), deadline_s)


if __name__ == "__main__":
    main()
