"""Files every layer writes: atomically, so a crash or a kill never leaves half a file; and
trees of files from another machine, copied as data (no link followed or copied)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath

from compilewatch.core.errors import ResultsFileError


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *,
                 durable: bool = True) -> None:
    """Write via a temp file + rename so a crash never leaves a half-written file.
    ``durable=False`` skips the fsync, for files rewritten whole on every run (a dashboard's
    hundreds of pages: the rename still keeps a reader from a half-written page)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as open() would: mkstemp makes files 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


MAX_TREE_ENTRIES = 100_000  # files and folders of one tree copied as data


def plain_tree(root: Path) -> list[tuple[PurePosixPath, bool]]:
    """Every entry under ``root``, relative, True for a folder: what ``copy_plain`` may copy.

    The tree is data from another machine (a shard's artifact). A symbolic link (to a folder
    outside, which a second tree's file would then be written through, or to ``/etc/passwd``),
    anything but a plain file or folder, and a file with more than one name (a hard link to a
    file elsewhere) are refused, naming the entry, before anything is copied."""
    _plain(root, root)
    found: list[tuple[PurePosixPath, bool]] = []
    todo = [root]
    while todo:
        folder = todo.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                path = Path(entry.path)
                is_dir = _plain(path, root)
                found.append((PurePosixPath(path.relative_to(root).as_posix()), is_dir))
                if is_dir:
                    todo.append(path)
                if len(found) > MAX_TREE_ENTRIES:
                    raise ResultsFileError(f"{root}: more than {MAX_TREE_ENTRIES} entries")
    return sorted(found)


def _plain(path: Path, root: Path) -> bool:
    """Whether ``path`` is a folder (else a plain file of one name); raise on anything else."""
    st = path.lstat()
    if stat.S_ISDIR(st.st_mode):
        return True
    where = path if path == root else f"{root}: {path.relative_to(root)}"
    if stat.S_ISLNK(st.st_mode):
        raise ResultsFileError(f"{where} is a symbolic link (to {_target(path)!r}): a shard "
                               "folder holds only plain files and folders, and none is copied")
    if not stat.S_ISREG(st.st_mode):
        raise ResultsFileError(f"{where} is not a plain file or folder")
    if st.st_nlink > 1:
        raise ResultsFileError(f"{where} has {st.st_nlink} names (a hard link): a shard "
                               "folder's files are its own")
    return False


def _target(path: Path) -> str:
    try:
        return os.readlink(path)[:200]
    except OSError:
        return "?"


def copy_plain(root: Path, entries: list[tuple[PurePosixPath, bool]], dest: Path) -> None:
    """Copy ``plain_tree(root)``'s entries into ``dest`` (a new folder of our own), never
    following a link: a file swapped for one since it was listed is refused, not read."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, is_dir in entries:
        if is_dir:
            (dest / rel).mkdir(exist_ok=True)
        else:
            _copy_file(root / rel, dest / rel)


def _copy_file(source: Path, target: Path) -> None:
    """``source`` opened without following a link, written beside ``target`` and renamed
    over it (a rename replaces a link there instead of writing through it)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(source, flags)
    except OSError as e:
        raise ResultsFileError(f"{source}: cannot open it as a plain file: {e.strerror}") \
            from None
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise ResultsFileError(f"{source}: not a plain file")
        out, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            os.fchmod(out, 0o666 & ~_umask())
            with os.fdopen(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def check_disjoint(trees: dict[Path, list[tuple[PurePosixPath, bool]]]) -> None:
    """Trees copied into one folder must not overwrite each other: a file in two of them, or
    a file in one where another has a folder, is refused, naming both."""
    seen: dict[PurePosixPath, tuple[Path, bool]] = {}
    for root, entries in trees.items():
        for rel, is_dir in entries:
            first = seen.setdefault(rel, (root, is_dir))
            if first[0] != root and not (is_dir and first[1]):
                raise ResultsFileError(f"{root}: {rel} is also in {first[0]}: each shard's "
                                       "files are its own models'")
