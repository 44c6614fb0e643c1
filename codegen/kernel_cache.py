"""Compiled kernels kept on disk, so a repeated or resumed search, a sweep's next job and a final
build skip the compiler for kernels built before.

An entry is a few byte strings (for the CPU: the object code and the optimised LLVM IR) under the
SHA-256 of everything that decides them: the back end's format, the compiler's version, the
optimisation level, the CPU and its features, and the module's text. Where entries live:
$FLEXSCHED_KERNEL_CACHE, else $XDG_CACHE_HOME/flexsched/kernels (~/.cache/flexsched/kernels); an
empty value or `off` turns the cache off.

Entries are written to a temporary file and renamed, so a reader sees a whole entry or none; each
carries the digest of its contents, so one that is truncated or damaged is ignored (and replaced
by the next build), never loaded. Reading is a hit's only cost besides loading the code; now and
then a write trims the folder to MAX_BYTES, dropping the entries least recently used first.
Anything the file system refuses (a full disk, a read-only folder) only means no cache.
"""

from __future__ import annotations

import hashlib
import os
import random
import struct
import tempfile

from flexsched.user_cache import user_cache_dir

ENVIRONMENT_VARIABLE = "FLEXSCHED_KERNEL_CACHE"
OFF = ("", "off")
MAX_BYTES = 1 << 30              # the folder is trimmed to 3/4 of this once it grows past it
PRUNE_CHANCE = 1 / 64            # each write checks the folder's size with this chance: ~1 in 64 writes
MAX_ENTRY_BYTES = 1 << 30        # a larger file is not a kernel of ours, and is not read
_MAGIC = b"flexsched-kernel\x00\x01"
_SUFFIX = ".kernel"


def directory():
    """The folder entries live in, or None where the cache is off."""
    configured = os.environ.get(ENVIRONMENT_VARIABLE)
    if configured is None:
        return os.path.join(user_cache_dir(), "kernels")
    if configured.strip().lower() in OFF:
        return None
    return os.path.expanduser(configured)


def key(*parts):
    """The hex digest naming the entry of these parts (strings or bytes, in order)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else bytes(part)
        digest.update(struct.pack("<Q", len(data)))
        digest.update(data)
    return digest.hexdigest()


def path_of(entry_key, folder=None):
    """Where the entry of a key is (or would be) stored: <folder>/<first 2 hex digits>/<key>.kernel."""
    folder = folder or directory()
    return os.path.join(folder, entry_key[:2], entry_key + _SUFFIX)


def load(entry_key):
    """The byte strings stored under a key, or None: no cache, no entry, or one that fails its checks."""
    folder = directory()
    if folder is None:
        return None
    path = path_of(entry_key, folder)
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            data = file.read(MAX_ENTRY_BYTES) if size <= MAX_ENTRY_BYTES else b""
    except OSError:
        return None
    blobs = _unpack(data)
    if blobs is None:
        _remove(path)   # damaged: the build that follows writes it afresh
        return None
    try:
        os.utime(path)  # recently used: trimming keeps it
    except OSError:
        pass
    return blobs


def store(entry_key, blobs):
    """Keep the byte strings under a key; whether they were written (False: no cache, or the file
    system refused)."""
    folder = directory()
    if folder is None:
        return False
    path = path_of(entry_key, folder)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".partial-", dir=os.path.dirname(path))
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(_pack(blobs))
            os.replace(temporary, path)
        except BaseException:
            _remove(temporary)
            raise
    except OSError:
        return False
    if random.random() < PRUNE_CHANCE:
        prune(folder)
    return True


def prune(folder=None, max_bytes=None):
    """Delete the least recently used entries (and partial files) until the folder holds 3/4 of
    max_bytes, if it holds more than max_bytes; the bytes left."""
    folder = folder or directory()
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    if folder is None:
        return 0
    entries, total = [], 0
    try:
        shards = [entry.path for entry in os.scandir(folder) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    for shard in shards:
        try:
            files = list(os.scandir(shard))
        except OSError:
            continue
        for entry in files:
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            entries.append((stat.st_mtime, stat.st_size, entry.path))
            total += stat.st_size
    if total <= max_bytes:
        return total
    for _, size, path in sorted(entries):
        if total <= max_bytes * 3 // 4:
            break
        if _remove(path):
            total -= size
    return total


def _pack(blobs):
    """magic, count, lengths, SHA-256 of the payload, payload."""
    payload = b"".join(blobs)
    header = _MAGIC + struct.pack(f"<I{len(blobs)}Q", len(blobs), *(len(blob) for blob in blobs))
    return header + hashlib.sha256(payload).digest() + payload


def _unpack(data):
    """The byte strings of a packed entry, or None if it is not one (wrong magic, truncated, damaged)."""
    start = len(_MAGIC)
    if not data.startswith(_MAGIC) or len(data) < start + 4:
        return None
    (count,) = struct.unpack_from("<I", data, start)
    lengths_end = start + 4 + 8 * count
    if count > 64 or len(data) < lengths_end + 32:
        return None
    lengths = struct.unpack_from(f"<{count}Q", data, start + 4)
    digest, payload = data[lengths_end:lengths_end + 32], data[lengths_end + 32:]
    if sum(lengths) != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    blobs, offset = [], 0
    for length in lengths:
        blobs.append(payload[offset:offset + length])
        offset += length
    return tuple(blobs)


def _remove(path):
    try:
        os.remove(path)
        return True
    except OSError:
        return False
