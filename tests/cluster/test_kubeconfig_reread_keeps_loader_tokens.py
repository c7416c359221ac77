"""A re-read of the kubeconfig takes another writer's tokens only when that writer changed the
user's entry (review23's finding on 82de930): a rewrite of anything else in the file (another
user's token, a Secret updated for someone else) after the loader refreshed must not hand it back
the file's older tokens, for an oidc refresh-token already spent at the identity provider."""

from pathlib import Path

import pytest
import yaml

from scheduler.cluster import kubeconfig
from scheduler.cluster.kubeconfig import auth_provider_persister, loadable_without_exec, merged_kubeconfig, persist_or_warn
from tests.cluster.test_kubeconfig_auth_provider_write_back import document, loader_config, refresh


def _file_refresh_token(file: Path) -> str:
    return str(yaml.safe_load(file.read_text())["users"][0]["user"]["auth-provider"]["config"]["refresh-token"])


def _another_users_rewrite(file: Path) -> None:
    rewritten = document("ID-0", "RT-0")
    rewritten["users"][1]["user"]["token"] = "rotated"
    file.write_text(yaml.safe_dump(rewritten))


def test_a_rewrite_of_another_user_after_a_refused_write_back_keeps_the_loaders_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    merged = merged_kubeconfig((file,))
    loadable = loadable_without_exec(merged, context="here")
    write_back = auth_provider_persister(merged, loadable, context="here")
    refresh(loadable, **{"id-token": "ID-1", "refresh-token": "RT-1"})  # RT-0 spent at the provider

    def read_only(*_args: object, **_kwargs: object) -> None:
        raise OSError(30, "Read-only file system")

    with monkeypatch.context() as patched:
        patched.setattr(kubeconfig, "_replace_keeping_mode", read_only)
        persist_or_warn(write_back)  # a Secret's mount: warned, the loader keeps RT-1
    assert _file_refresh_token(file) == "RT-0"

    _another_users_rewrite(file)
    write_back.reread(merged_kubeconfig((file,)))

    assert loader_config(loadable)["refresh-token"] == "RT-1"
    assert loader_config(loadable)["id-token"] == "ID-1"


def test_a_re_read_between_the_loaders_refresh_and_its_write_back_loses_nothing(tmp_path: Path) -> None:
    file = tmp_path / "config"
    file.write_text(yaml.safe_dump(document("ID-0", "RT-0")))
    merged = merged_kubeconfig((file,))
    loadable = loadable_without_exec(merged, context="here")
    write_back = auth_provider_persister(merged, loadable, context="here")
    refresh(loadable, **{"id-token": "ID-1", "refresh-token": "RT-1"})  # the loader's own config first

    _another_users_rewrite(file)
    write_back.reread(merged_kubeconfig((file,)))  # the follower, before the loader persists
    write_back()

    assert (loader_config(loadable)["refresh-token"], _file_refresh_token(file)) == ("RT-1", "RT-1")
