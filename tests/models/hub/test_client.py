"""The hub client against the fake hub (real huggingface_hub, real HTTP on loopback)."""

from __future__ import annotations

import hashlib
import http.client
import time
import urllib.request
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import errors as hf_errors
from huggingface_hub import get_hf_file_metadata, hf_hub_download

from models.hub.client import HubClient, HubError, unsafe_path_reason
from tests.fixtures import fake_hub as hub_fixtures
from tests.fixtures.fake_hub import FakeHub

fake_hub = hub_fixtures.fake_hub

BIG = bytes(range(256)) * 4096  # 1 MiB
GGUF = b"GGUF" + bytes(5000)


def _repos(hub: FakeHub) -> None:
    hub.add_repo("org/Tiny-GGUF", {"README.md": b"# hi\n", "tiny-Q4_K_M.gguf": GGUF, "sub/notes.txt": b"n",
                                   "big.bin": BIG},
                 tags=["gguf", "llama"], license="apache-2.0", downloads=500,
                 last_modified="2025-03-01T00:00:00.000Z")
    hub.add_repo("org/Tiny-AWQ", {"config.json": b"{}"}, tags=["awq", "safetensors"], downloads=50,
                 last_modified="2025-06-01T00:00:00.000Z")
    hub.add_repo("other/Big-GGUF", {"x.gguf": GGUF}, tags=["gguf"], downloads=5000,
                 last_modified="2024-01-01T00:00:00.000Z")
    hub.add_repo("org/Gated", {"m.gguf": GGUF, "README.md": b"r"}, gated="manual", tags=["gguf"])


def test_search_filters_and_sorts(fake_hub: FakeHub) -> None:
    _repos(fake_hub)
    client = HubClient()
    assert client.endpoint == fake_hub.endpoint
    by_downloads = [r.id for r in client.search("gguf", kind="gguf")]
    assert by_downloads == ["other/Big-GGUF", "org/Tiny-GGUF"]
    assert [r.id for r in client.search("tiny", sort="recent")] == ["org/Tiny-AWQ", "org/Tiny-GGUF"]
    assert [r.id for r in client.search("", kind="awq")] == ["org/Tiny-AWQ"]
    assert len(client.search("", limit=2)) == 2
    top = client.search("tiny-gguf")[0]
    assert (top.downloads, top.tags, top.last_modified.year) == (500, ("gguf", "llama"), 2025)
    assert client.search("nothing-like-this") == []


def test_repo_details_reads_files_hashes_and_state(fake_hub: FakeHub) -> None:
    _repos(fake_hub)
    fake_hub.page_size = 2  # the tree comes in pages, joined by Link: rel="next"
    details = HubClient().repo_details("org/Tiny-GGUF")
    assert len(details.sha) == 40 and details.sha == fake_hub.repos["org/Tiny-GGUF"].sha
    assert {f.path for f in details.files} == {"README.md", "tiny-Q4_K_M.gguf", "sub/notes.txt", "big.bin"}
    gguf = details.file("tiny-Q4_K_M.gguf")
    assert gguf.size == len(GGUF) and gguf.sha256 == hashlib.sha256(GGUF).hexdigest() and gguf.is_lfs
    readme = details.file("README.md")
    assert readme.sha256 is None and readme.git_oid == hashlib.sha1(b"blob 5\0# hi\n").hexdigest()  # noqa: S324
    assert details.file("big.bin").is_lfs  # *.bin is LFS
    assert (details.license, details.gated, details.private) == ("apache-2.0", False, False)
    assert fake_hub.count_requests("GET", "/tree/") >= 3
    # the file list is read at the commit model_info gave, and that commit is also a revision
    assert HubClient().repo_details("org/Tiny-GGUF", revision=details.sha).sha == details.sha


def test_gated_repo_details_are_public_but_files_need_the_token(fake_hub: FakeHub,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _repos(fake_hub)
    client = HubClient(token=False)
    assert client.repo_details("org/Gated").gated
    assert client.auth_headers() == {}
    url = client.file_url("org/Gated", "README.md")
    with pytest.raises(hf_errors.GatedRepoError):
        get_hf_file_metadata(url, token=False)
    assert fake_hub.requests[-1][0] == "HEAD"
    with pytest.raises(hf_errors.GatedRepoError):
        get_hf_file_metadata(url, token="hf_wrong")
    monkeypatch.setenv("HF_TOKEN", fake_hub.token)  # the standard location
    client = HubClient()
    assert client.auth_headers() == {"Authorization": f"Bearer {fake_hub.token}"}
    meta = get_hf_file_metadata(url, token=client.token)
    assert meta.etag == hashlib.sha1(b"blob 1\0r").hexdigest()  # noqa: S324


@pytest.mark.parametrize(("repo", "revision", "kind"), [
    ("org/Nope", "main", "not_found"),
    ("org/Tiny-GGUF", "v9.9", "revision_not_found"),
])
def test_missing_repo_or_revision(fake_hub: FakeHub, repo: str, revision: str, kind: str) -> None:
    _repos(fake_hub)
    with pytest.raises(HubError) as info:
        HubClient().repo_details(repo, revision=revision)
    assert info.value.kind == kind and repo in str(info.value) and "\n" not in str(info.value)


def test_traversal_entry_refused(fake_hub: FakeHub) -> None:
    fake_hub.add_repo("org/Evil", {"ok.gguf": GGUF}, evil_entries=["../../evil"])
    with pytest.raises(HubError) as info:
        HubClient().repo_details("org/Evil")
    assert info.value.kind == "refused" and "../../evil" in str(info.value)
    with pytest.raises(HubError, match="refused"):
        HubClient().file_url("org/Evil", "../../evil")


@pytest.mark.parametrize("name", ["../../evil", "/etc/passwd", "a/../../b", "C:\\Windows\\x", "c:x",
                                  "\\\\server\\share\\x", "a\\..\\b", ""])
def test_unsafe_names(name: str) -> None:
    assert unsafe_path_reason(name)


@pytest.mark.parametrize("name", ["model.gguf", "sub/dir/model-Q4_K_M.gguf", "a..b.gguf", ".gitattributes"])
def test_safe_names(name: str) -> None:
    assert unsafe_path_reason(name) is None


def test_offline_by_env_touches_no_network(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    _repos(fake_hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    client = HubClient()
    for call in (lambda: client.search("tiny"), lambda: client.repo_details("org/Tiny-GGUF")):
        with pytest.raises(HubError) as info:
            call()
        assert info.value.kind == "offline"
    assert fake_hub.requests == []


def test_unreachable_hub_is_offline_quickly(fake_hub: FakeHub) -> None:
    port = fake_hub.port
    fake_hub.stop()
    client = HubClient(endpoint=f"http://127.0.0.1:{port}")
    start = time.monotonic()
    for call in (lambda: client.search("tiny"), lambda: client.repo_details("org/Tiny-GGUF")):
        with pytest.raises(HubError) as info:
            call()
        assert info.value.kind == "offline"
    assert time.monotonic() - start < 3


def test_a_server_error_that_persists_is_a_network_error(fake_hub: FakeHub) -> None:
    _repos(fake_hub)
    fake_hub.fault(fail_codes=[500] * 10)  # a busy hub is retried (tests/models/download/test_download_faults.py)
    with pytest.raises(HubError) as info:
        HubClient(retries=2, backoff_s=0.01, sleep=lambda _s: None).repo_details("org/Tiny-GGUF")
    assert info.value.kind == "network" and "500" in str(info.value)


# -- the fake hub itself, as huggingface_hub's downloader sees it -------------------------------------


def test_hf_hub_download_follows_the_cdn_redirect(fake_hub: FakeHub, tmp_path: Path) -> None:
    _repos(fake_hub)
    path = hf_hub_download("org/Tiny-GGUF", "big.bin", cache_dir=tmp_path, endpoint=fake_hub.endpoint)
    assert Path(path).read_bytes() == BIG
    assert any(p.startswith("/cdn/") for _, p, _ in fake_hub.requests)
    meta = get_hf_file_metadata(HubClient().file_url("org/Tiny-GGUF", "big.bin"))
    assert meta.etag == hashlib.sha256(BIG).hexdigest() and meta.size == len(BIG)
    assert meta.location.startswith(f"http://localhost:{fake_hub.port}/cdn/")
    assert meta.commit_hash == fake_hub.repos["org/Tiny-GGUF"].sha
    small = hf_hub_download("org/Tiny-GGUF", "sub/notes.txt", cache_dir=tmp_path, endpoint=fake_hub.endpoint)
    assert Path(small).read_bytes() == b"n"


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:  # noqa: S310
        return r.status, dict(r.headers), r.read()


def test_ranges_and_faults(fake_hub: FakeHub) -> None:
    _repos(fake_hub)
    url = HubClient().file_url("org/Tiny-GGUF", "big.bin")
    status, headers, body = _get(url, {"Range": "bytes=1000-"})  # urllib follows the 302
    assert status == 206 and body == BIG[1000:] and headers["Content-Range"] == f"bytes 1000-{len(BIG) - 1}/{len(BIG)}"
    status, _, body = _get(url, {"Range": "bytes=10-19"})
    assert status == 206 and body == BIG[10:20]
    fake_hub.fault("org/Tiny-GGUF", "big.bin", ignore_range=True)
    status, _, body = _get(url, {"Range": "bytes=10-19"})
    assert status == 200 and body == BIG
    fake_hub.fault("org/Tiny-GGUF", "big.bin", corrupt=True)
    status, _, body = _get(url)
    assert len(body) == len(BIG) and body != BIG
    fake_hub.fault("org/Tiny-GGUF", "big.bin", drop_after=1000, times=1)
    with pytest.raises(http.client.IncompleteRead) as cut:  # the connection ends after 1000 body bytes
        _get(url)
    assert cut.value.partial == BIG[:1000] and cut.value.expected == len(BIG) - 1000
    assert _get(url)[2] == BIG  # only once
    fake_hub.fault("org/Tiny-GGUF", "big.bin", fail_codes=[503])
    with pytest.raises(urllib.error.HTTPError, match="503"):
        _get(url)
    assert _get(url)[2] == BIG
    fake_hub.fault("org/Tiny-GGUF", "big.bin", bad_etag=True)
    assert get_hf_file_metadata(url).etag == "not-a-hash"
    # The count only grows, and a handler counts a chunk after the client may have it: wait for it.
    assert hub_fixtures.wait_for(lambda: fake_hub.bytes_sent > 3 * len(BIG))


def test_stall_is_timed(fake_hub: FakeHub) -> None:
    _repos(fake_hub)
    fake_hub.fault("org/Tiny-GGUF", "big.bin", stall_s=2.0, stall_after=100)
    url = HubClient().file_url("org/Tiny-GGUF", "big.bin")
    with pytest.raises(httpx2.ReadTimeout):
        httpx2.get(url, follow_redirects=True, timeout=0.5)
