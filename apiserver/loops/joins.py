"""The join loop: approves a pull location's agent's certificate requests, and nothing else.

It watches the hub's CertificateSigningRequests. One of signer
`kubernetes.io/kube-apiserver-client` whose CN is `kmc:location:<name>` is judged by
`locations/joins.judge`: a join's first request (made with that location's bootstrap token,
from its latest `kubectl mc join --mode pull`) or a renewal (made by `kmc:location:<name>`
itself) of a Pull Location that exists is approved; anything else is left pending with a
Warning Event on the request saying why, for a person to deny or approve. A first request
marks the join used on the Location (with its resourceVersion: of two requests racing, one
wins) and expires the token (kube-apiserver refuses it from then on, and its token cleaner
deletes it), before the approval. Leader only; every request is judged again on each
change, and an approval already written is left alone.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging

from apiserver.kube import events
from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Informer
from apiserver.leader import Leadership
from apiserver.locations import joins
from apiserver.models.location import PATH as LOCATIONS
from apiserver.objects import Obj

log = logging.getLogger(__name__)

COMPONENT = "kmc-join"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
TOKENS = "/api/v1/namespaces/kube-system/secrets"
RESYNC = 10.0  # seconds between judging every waiting request again


class JoinLoop:
    def __init__(self, hub: Kube, locations: Informer, leadership: Leadership) -> None:
        self.hub = hub
        self.locations = locations
        self.leadership = leadership
        self.requests = Informer(hub, CSRS, self._changed)
        self.events = events.Recorder(hub, COMPONENT)
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._refused: dict[str, str] = {}  # CSR name -> the reason last posted
        locations.subscribe(self._location_changed)

    async def _changed(self, kind: str, csr: Obj, _: Obj | None) -> None:
        if kind != "DELETED" and joins.location_of(csr) and not joins.decided(csr):
            self._queue.put_nowait(csr["metadata"]["name"])

    async def _location_changed(self, *_: object) -> None:
        # A Location made or turned Pull after its request came: judge the waiting ones again.
        for csr in self.requests.items():
            await self._changed("MODIFIED", csr, None)

    async def run(self) -> None:
        watch = asyncio.create_task(self.requests.run(), name="hub csrs")
        try:
            while True:
                try:
                    async with asyncio.timeout(RESYNC):  # never wait_for: see leader.py
                        name = await self._queue.get()
                except TimeoutError:
                    # Now and then every waiting request again: one queued while we did not
                    # lead (and so dropped), or whose Location came meanwhile.
                    await self._location_changed()
                    continue
                if not self.leadership.leading.is_set():
                    continue  # the leader judges it; if that becomes us, the resync does
                try:
                    await self.reconcile(name)
                except ApiError as err:
                    if err.code != 409:  # a conflict: judged again on the newer version
                        log.warning("certificate request %s: %s; trying again", name, err)
                    asyncio.get_running_loop().call_later(5.0, self._queue.put_nowait, name)
        finally:
            watch.cancel()

    async def reconcile(self, name: str) -> None:
        csr = self.requests.get(name)
        if csr is None or joins.decided(csr):
            return
        where = joins.location_of(csr)
        if where is None:
            return
        location = self.locations.get(where)
        verdict = joins.judge(csr, location)
        if not verdict.approve:
            if self._refused.get(name) != verdict.reason:
                self._refused[name] = verdict.reason
                log.info("certificate request %s left pending: %s", name, verdict.message)
                self.events.post(csr, "Warning", verdict.reason, f"not approved: {verdict.message}")
            return
        if verdict.first:
            assert location is not None
            await self._use(location, verdict.token_id, name)
        await self._approve(csr, verdict)
        self._refused.pop(name, None)
        log.info("approved certificate request %s: %s", name, verdict.message)

    async def _use(self, location: Obj, token_id: str, csr: str) -> None:
        """Mark the join used (refused on a conflict: then the request is judged again
        against the Location as it is now), then expire its token."""
        meta = location["metadata"]
        mark = joins.used_mark(token_id, csr)
        if (meta.get("annotations") or {}).get(joins.USED_ANNOTATION) != mark:
            written = await self.hub.merge_patch(
                f"{LOCATIONS}/{meta['name']}",
                {
                    "metadata": {
                        "resourceVersion": meta["resourceVersion"],
                        "annotations": {joins.USED_ANNOTATION: mark},
                    }
                },
            )
            await self.locations.observe(written)
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            await self.hub.merge_patch(
                f"{TOKENS}/bootstrap-token-{token_id}",
                {
                    "data": {
                        "expiration": base64.b64encode(now.encode()).decode(),
                        "usage-bootstrap-authentication": base64.b64encode(b"false").decode(),
                    }
                },
            )
        except ApiError as err:
            if err.code != 404:  # gone already (expired, cleaned): nothing can use it
                raise

    async def _approve(self, csr: Obj, verdict: joins.Verdict) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = dict(csr.get("status") or {})
        status["conditions"] = [
            *(status.get("conditions") or []),
            {
                "type": "Approved",
                "status": "True",
                "reason": verdict.reason,
                "message": f"approved by kmc-apiserver: {verdict.message}",
                "lastUpdateTime": now,
            },
        ]
        body = {**csr, "status": status}
        name = csr["metadata"]["name"]
        await self.hub.request("PUT", f"{CSRS}/{name}/approval", body=body)
