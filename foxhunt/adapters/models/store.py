"""The model stores (ports.ModelStore): a local directory, and S3 (or any S3-compatible server) through
boto3. A model is a folder (or key prefix) named by its id, holding its files; the manifest is written
last and marks a model as whole."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from foxhunt.errors import ModelError
from foxhunt.ports import ModelStore

MANIFEST = "manifest.json"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def check_id(model_id: str) -> str:
    if not _ID.fullmatch(model_id) or ".." in model_id:
        raise ModelError(f"{model_id!r} is not a model id (letters, digits, '.', '-' and '_', as `models list` shows)")
    return model_id


def _check_files(files: Mapping[str, bytes]) -> None:
    if MANIFEST not in files:
        raise ModelError(f"a model needs a {MANIFEST}")
    for name in files:
        if not _FILE.fullmatch(name):
            raise ModelError(f"{name!r} is not a file name a model store keeps")


class LocalModelStore(ModelStore):
    """`root/<id>/<file>`. A put writes a hidden folder beside and renames it into place: one rename,
    atomic on a POSIX file system, so a reader sees all of a model's files or none."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)

    def put(self, model_id: str, files: Mapping[str, bytes]) -> bool:
        check_id(model_id)
        _check_files(files)
        final = self.root / model_id
        if (final / MANIFEST).exists():
            return False
        incoming = self.root / f".incoming-{model_id}-{os.getpid()}"
        try:
            shutil.rmtree(incoming, ignore_errors=True)
            incoming.mkdir(parents=True)
            for name in sorted(files, key=lambda n: n == MANIFEST):  # the manifest last
                with open(incoming / name, "wb") as f:
                    f.write(files[name])
                    f.flush()
                    os.fsync(f.fileno())
            if final.exists():  # a folder without a manifest: what a removal cut short left, never a model
                shutil.rmtree(final)
            os.rename(incoming, final)
            fd = os.open(self.root, os.O_RDONLY)
            try:
                os.fsync(fd)  # the rename itself
            finally:
                os.close(fd)
        except OSError as e:
            shutil.rmtree(incoming, ignore_errors=True)
            raise ModelError(f"cannot store model {model_id} in {self.location}: {e}") from e
        return True

    def get(self, model_id: str) -> dict[str, bytes]:
        folder = self.root / check_id(model_id)
        if not (folder / MANIFEST).is_file():
            raise ModelError(f"no model {model_id} in {self.location}")
        try:
            return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        except OSError as e:
            raise ModelError(f"cannot read model {model_id} in {self.location}: {e}") from e

    def ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if not p.name.startswith(".") and (p / MANIFEST).is_file())

    def remove(self, model_id: str) -> None:
        folder = self.root / check_id(model_id)
        if not (folder / MANIFEST).is_file():
            raise ModelError(f"no model {model_id} in {self.location}")
        try:
            (folder / MANIFEST).unlink()  # first: the model stops being whole at once
            shutil.rmtree(folder)
        except OSError as e:
            raise ModelError(f"cannot remove model {model_id} from {self.location}: {e}") from e


class S3ModelStore(ModelStore):
    """`s3://bucket/prefix/<id>/<file>`, through boto3 (credentials from its usual chain: the environment,
    a profile, an instance role; never foxhunt's configuration). The manifest is uploaded after every other
    file and deleted first, so listing manifests lists whole models; each upload carries a checksum the
    server verifies, so a file broken in transit is refused, not stored."""

    def __init__(self, url: str, endpoint_url: str = "", region: str = "") -> None:
        import boto3
        from botocore.config import Config as BotoConfig

        if not url.startswith("s3://") or not url[5:].split("/")[0]:
            raise ModelError(f"{url!r} is not an S3 location (s3://bucket/prefix)")
        self.bucket, _, prefix = url[5:].partition("/")
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.location = url
        self.client = boto3.client(
            "s3", endpoint_url=endpoint_url or None, region_name=region or None,
            config=BotoConfig(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=60),
        )

    def _key(self, model_id: str, name: str) -> str:
        return f"{self.prefix}{model_id}/{name}"

    def _call(self, what: str, fn, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404"):
                raise ModelError(f"{what}: not found in {self.location}") from e
            raise ModelError(f"{what} in {self.location}: {code or e}") from e
        except BotoCoreError as e:
            raise ModelError(f"{what} in {self.location}: {e}") from e

    def put(self, model_id: str, files: Mapping[str, bytes]) -> bool:
        check_id(model_id)
        _check_files(files)
        if MANIFEST in self._names(model_id):
            return False
        for name in sorted(files, key=lambda n: n == MANIFEST):
            self._call(f"storing {name} of model {model_id}", self.client.put_object, Bucket=self.bucket,
                       Key=self._key(model_id, name), Body=files[name], ChecksumAlgorithm="SHA256")
        return True

    def get(self, model_id: str) -> dict[str, bytes]:
        check_id(model_id)
        names = self._names(model_id)
        if MANIFEST not in names:
            raise ModelError(f"no model {model_id} in {self.location}")
        out = {}
        for name in names:
            answer = self._call(f"reading {name} of model {model_id}", self.client.get_object,
                                Bucket=self.bucket, Key=self._key(model_id, name))
            out[name] = answer["Body"].read()
        return out

    def _names(self, model_id: str) -> list[str]:
        prefix = self._key(model_id, "")
        return sorted(key[len(prefix):] for key in self._keys(prefix) if "/" not in key[len(prefix):])

    def _keys(self, prefix: str) -> list[str]:
        keys, token = [], None
        while True:
            kwargs = {"Bucket": self.bucket, "Prefix": prefix} | ({"ContinuationToken": token} if token else {})
            page = self._call("listing", self.client.list_objects_v2, **kwargs)
            keys += [item["Key"] for item in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return keys
            token = page["NextContinuationToken"]

    def ids(self) -> list[str]:
        suffix = "/" + MANIFEST
        return sorted(
            key[len(self.prefix) : -len(suffix)] for key in self._keys(self.prefix)
            if key.endswith(suffix) and "/" not in key[len(self.prefix) : -len(suffix)]
        )

    def remove(self, model_id: str) -> None:
        names = self._names(check_id(model_id))
        if MANIFEST not in names:
            raise ModelError(f"no model {model_id} in {self.location}")
        for name in sorted(names, key=lambda n: n != MANIFEST):  # the manifest first
            self._call(f"removing {name} of model {model_id}", self.client.delete_object, Bucket=self.bucket,
                       Key=self._key(model_id, name))
