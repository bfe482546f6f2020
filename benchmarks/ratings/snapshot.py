"""Reading a public release as it lies on disk: a git directory without a work tree (what the session's
``fetch`` brings: ``MIRRORS/owner+name/repo``), a clone (read at its HEAD commit), or a plain folder.

A snapshot of a big repository can lack its largest files; :meth:`Snapshot.has` says which are there,
and a source built from a missing file is left out with the file named.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from lightning_metrics.errors import InputError


class Snapshot:
    """One repository's files at one commit, by path inside the repository."""

    def __init__(self, name: str, root: Path):
        self.name, self.root = name, Path(root)
        self.bare = not (self.root / ".git").exists() and (self.root / "HEAD").is_file()
        self.git_dir = self.root if self.bare else self.root / ".git" if (self.root / ".git").exists() else None
        self._paths: set[str] | None = None

    def __repr__(self) -> str:
        return f"Snapshot({self.name}, {self.root})"

    def _git(self, *args: str, stdin: bytes | None = None) -> bytes:
        done = subprocess.run(["git", f"--git-dir={self.git_dir}", *args], input=stdin, capture_output=True)
        if done.returncode:
            raise InputError(str(self.root), f"git {' '.join(args)} failed: {done.stderr.decode().strip()}")
        return done.stdout

    def commit(self) -> str:
        """The commit the files come from ('' for a folder that is not a git repository)."""
        return self._git("rev-parse", "HEAD").decode().strip() if self.git_dir else ""

    def paths(self) -> set[str]:
        """Every file path present at the commit (every file, for a folder without git), relative to the root."""
        if self._paths is None:
            if self.git_dir:
                names = self._git("ls-tree", "-r", "--name-only", "-z", "HEAD").decode().split("\0")
                listed = {n for n in names if n}
                # a snapshot may list a file whose object it lacks: only the readable ones count
                check = self._git_batch_check(sorted(listed))
                self._paths = {n for n in listed if check.get(n)}
            else:
                self._paths = {str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file()}
        return self._paths

    def _git_batch_check(self, names: list[str]) -> dict[str, bool]:
        query = "".join(f"HEAD:{n}\n" for n in names).encode()
        lines = self._git("cat-file", "--batch-check", stdin=query).decode().splitlines()
        return {n: not line.endswith("missing") for n, line in zip(names, lines)}

    def has(self, path: str) -> bool:
        return path in self.paths()

    def under(self, prefix: str) -> list[str]:
        """The present files under a folder, sorted."""
        prefix = prefix.rstrip("/") + "/"
        return sorted(p for p in self.paths() if p.startswith(prefix))

    def read_bytes(self, path: str) -> bytes:
        if not self.has(path):
            raise InputError(f"{self.name}:{path}", "not in the snapshot")
        if self.git_dir:
            return self._git("show", f"HEAD:{path}")
        return (self.root / path).read_bytes()

    def text(self, path: str) -> str:
        data = self.read_bytes(path)
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise InputError(f"{self.name}:{path}", f"not UTF-8 at byte {e.start}") from None

    def lines(self, path: str) -> list[str]:
        """A text file's lines without their line ends (a final newline ends the last line)."""
        text = self.text(path)
        return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")

    def tar_members(self, path: str) -> dict[str, bytes]:
        """The regular files of a ``.tar.gz`` in the snapshot by member name (macOS ``._`` files skipped)."""
        members = {}
        with tarfile.open(fileobj=io.BytesIO(self.read_bytes(path)), mode="r:gz") as archive:
            for member in archive.getmembers():
                if member.isfile() and not Path(member.name).name.startswith("._"):
                    members[member.name] = archive.extractfile(member).read()
        return members


def find_snapshot(mirrors: Path, repo: str) -> Snapshot | None:
    """``owner/name`` under ``mirrors`` as ``fetch`` lays it out (``owner+name/repo``), or a clone at
    ``owner+name/`` or ``owner/name/``; None when none is there."""
    owner, name = repo.split("/")
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / f"{owner}+{name}", mirrors / owner / name):
        if (candidate / "HEAD").is_file() or (candidate / ".git").exists():
            return Snapshot(repo, candidate)
    return None
