"""The auth-provider config the Kubernetes client's loader refreshes, written back to the
kubeconfig file that names the user (scheduler/cluster/kubeconfig.py, auth_provider_persister),
beside the other writers of that file (kubectl, kubelogin, another cellfit process).

Since 1d72acf it wrote back the whole config the loader had read at start: a login tool that
had refreshed the tokens into the file meanwhile (its refresh-token rotated, the old one spent)
had them replaced with the spent refresh-token, so the user's next refresh failed (review22 F4).
It also ignored kubectl's ``<file>.lock`` and wrote through a fixed temporary name, which two
writers at once share. Now only the keys the loader changed are written, nothing over a user
entry rewritten since, under the lock, through a temporary file of its own."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.cluster import kubeconfig
from scheduler.cluster.kubeconfig import (
    KubeconfigFieldError, auth_provider_persister, loadable_without_exec, merged_kubeconfig, persist_or_warn,
)


def document(id_token: str, refresh_token: str, **extra: str) -> dict[str, Any]:
    config = {"client-id": "c", "idp-issuer-url": "https://idp", "id-token": id_token, "refresh-token": refresh_token}
    return {"apiVersion": "v1", "kind": "Config", "current-context": "here",
            "clusters": [{"name": "here", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"auth-provider": {"name": "oidc", "config": config | extra}}},
                      {"name": "someone", "user": {"token": "theirs"}}],
            "contexts": [{"name": "here", "context": {"cluster": "here", "user": "u"}}]}


def started(file: Path) -> tuple[Any, Any]:
    """What cellfit serve and kubectl cellfit hand the loader: its config and the persister."""
    merged = merged_kubeconfig((file,))
    loadable = loadable_without_exec(merged, context="here")
    return loadable, auth_provider_persister(merged, loadable, context="here")


def refresh(loadable: Any, **fields: str) -> None:
    """The loader's refresh: it sets the fields in its own copy of the config, then persists."""
    for node in loadable.value["users"]:
        if node.value["name"] == "u":
            node.value["user"]["auth-provider"]["config"].update(fields)


def config_in(file: Path) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(file.read_text())["users"][0]["user"]["auth-provider"]["config"]
    return config


def test_a_login_tool_s_newer_tokens_are_not_overwritten(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """review22's reproduction: kubelogin refreshed ID-1 / RT-1 into the file (RT-0 spent); the
    loader's later refresh of its own copy is not written over them."""
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    loadable, persist = started(file)
    file.write_text(yaml.safe_dump(document("ID-1", "RT-1")))
    refresh(loadable, **{"id-token": "ID-2"})
    caplog.set_level(logging.INFO, logger="scheduler.cluster.kubeconfig")
    persist()
    assert config_in(file) == document("ID-1", "RT-1")["users"][0]["user"]["auth-provider"]["config"]
    assert [r.getMessage() for r in caplog.records if "rewritten since" in r.getMessage()]


def test_only_the_keys_the_loader_changed_are_written_and_again_after_its_own_write(tmp_path: Path) -> None:
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0", **{"extra-scopes": "groups"})))
    file.chmod(0o600)
    loadable, persist = started(file)
    refresh(loadable, **{"id-token": "ID-1", "refresh-token": "RT-1"})
    persist()
    assert config_in(file) == document("ID-1", "RT-1", **{"extra-scopes": "groups"})["users"][0]["user"]["auth-provider"]["config"]
    refresh(loadable, **{"id-token": "ID-2", "refresh-token": "RT-2"})  # its own write is not another writer's
    persist()
    written = yaml.safe_load(file.read_text())
    assert written["users"][0]["user"]["auth-provider"]["config"]["refresh-token"] == "RT-2"
    assert written["users"][1] == {"name": "someone", "user": {"token": "theirs"}}
    assert file.stat().st_mode & 0o777 == 0o600
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config"]  # no lock, no temporary file left


def test_a_held_kubectl_lock_is_waited_for_then_the_write_given_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(kubeconfig, "KUBECONFIG_LOCK_WAIT_SECONDS", 0.3, raising=False)
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    loadable, persist = started(file)
    lock = tmp_path / "config.lock"
    lock.touch()  # kubectl config set-credentials, under way (or died holding it)
    refresh(loadable, **{"id-token": "ID-1"})
    with pytest.raises(KubeconfigFieldError, match=r"config\.lock is held by another writer"):
        persist()
    assert config_in(file)["id-token"] == "ID-0" and lock.exists()  # kubectl's lock is left alone
    persist_or_warn(persist)  # as cellfit calls it: warned of
    assert [r for r in caplog.records if r.levelno == logging.WARNING and "config.lock" in r.__dict__.get("reason", "")]


def test_a_lock_released_within_the_wait_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeconfig, "KUBECONFIG_LOCK_WAIT_SECONDS", 5.0, raising=False)
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    loadable, persist = started(file)
    lock = tmp_path / "config.lock"
    lock.touch()
    release = threading.Timer(0.3, lock.unlink)
    release.start()
    refresh(loadable, **{"id-token": "ID-1"})
    persist()
    release.join()
    assert config_in(file)["id-token"] == "ID-1" and not lock.exists()


def test_another_writer_s_temporary_file_is_not_taken(tmp_path: Path) -> None:
    """A second writer (kubectl cellfit beside cellfit serve) half way through its write: its
    temporary file is neither truncated nor moved over the kubeconfig."""
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    loadable, persist = started(file)
    theirs = tmp_path / ".config.cellfit-new"
    theirs.write_text("apiVersion: v1\nkind: Con")  # half written
    refresh(loadable, **{"id-token": "ID-1"})
    persist()
    assert theirs.read_text() == "apiVersion: v1\nkind: Con"
    assert config_in(file)["id-token"] == "ID-1"


def test_two_persisters_writing_together_leave_a_whole_file(tmp_path: Path) -> None:
    """Two processes' persisters (serve and the plugin) writing the same file at once, a reader
    beside them: every read is a whole kubeconfig, and no lock or temporary file is left."""
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    writers = [started(file) for _ in range(2)]
    broken: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            text = file.read_text()
            if not text or not isinstance(yaml.safe_load(text), dict):
                broken.append(text)

    def write(loadable: Any, persist: Any, name: str) -> None:
        for run in range(30):
            refresh(loadable, **{"id-token": f"{name}-{run}"})
            try:
                persist()
            except KubeconfigFieldError:
                pass  # the other's lock held past the wait: given up, as kubectl gives up
    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=write, args=(*writer, name)) for writer, name in zip(writers, "ab")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    reader.join()
    assert not broken
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config"]


def loader_config(loadable: Any) -> dict[str, Any]:
    """The user's auth-provider config as the loader holds it (and refreshes it)."""
    [config] = [node.value["user"]["auth-provider"]["config"] for node in loadable.value["users"] if node.value["name"] == "u"]
    return config  # type: ignore[no-any-return]


def test_a_login_tool_s_rewrite_read_again_is_the_loader_s_and_written_back_over(tmp_path: Path) -> None:
    """Two writers: kubelogin refreshes ID-1 / RT-1 into the file (RT-0 spent); the files read
    again (as the credentials' follower reads them) give the loader RT-1, so its next refresh
    uses a refresh-token that works, and what that refresh gives is written back over the
    login tool's (before: the loader kept RT-0, and every write back was refused)."""
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    merged = merged_kubeconfig((file,))
    loadable = loadable_without_exec(merged, context="here")
    write_back = auth_provider_persister(merged, loadable, context="here")
    file.write_text(yaml.safe_dump(document("ID-1", "RT-1")))
    write_back.reread(merged_kubeconfig((file,)))
    assert loader_config(loadable) == document("ID-1", "RT-1")["users"][0]["user"]["auth-provider"]["config"]
    refresh(loadable, **{"id-token": "ID-2", "refresh-token": "RT-2"})
    write_back()
    assert config_in(file) == document("ID-2", "RT-2")["users"][0]["user"]["auth-provider"]["config"]


def test_a_rewrite_of_a_field_a_refresh_does_not_write_is_not_taken(tmp_path: Path) -> None:
    # Another issuer is a restart's (the follower says so): the loader keeps its config, and its
    # refresh is not written over the rewrite.
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    merged = merged_kubeconfig((file,))
    loadable = loadable_without_exec(merged, context="here")
    write_back = auth_provider_persister(merged, loadable, context="here")
    file.write_text(yaml.safe_dump(document("ID-1", "RT-1", **{"idp-issuer-url": "https://other-idp"})))
    write_back.reread(merged_kubeconfig((file,)))
    assert loader_config(loadable) == document("ID-0", "RT-0")["users"][0]["user"]["auth-provider"]["config"]
    refresh(loadable, **{"id-token": "ID-2"})
    write_back()
    assert config_in(file)["id-token"] == "ID-1"
