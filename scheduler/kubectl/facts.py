"""Reads what ``why`` needs: the pod or Job, its pods and events, and cellfit's view of them."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import AbstractSet, Any, Mapping
from urllib.parse import quote

from estimator.objects import LABEL_SAMPLE_JOB
from scheduler.constants import ANNOTATION_CONFIGURATIONS
from scheduler.core.model import is_batch_job
from scheduler.kubectl.api import InspectApi, KubeApi
from scheduler.kubectl.errors import Forbidden, NotFound, PluginError, UsageError, ViewUnavailable
from scheduler.kubectl.views import bad_nodes, largest_node_cell, unbound_cells, unhealthy_nodes
from scheduler.kubectl.wording import MAX_NAMED
from scheduler.kubectl.objects import (
    INSUFFICIENT_GPU,
    PREEMPTED_BY,
    SCHEDULER_PREEMPTED,
    CellfitView,
    Event,
    Facts,
    GoneFacts,
    JobFacts,
    PodFacts,
    Preemption,
    events_from,
    job_from,
    job_pod_name,
    moment,
    pod_from,
    preempted_event,
    preemption_from,
)

KINDS = {"pod": "pod", "pods": "pod", "po": "pod", "job": "job", "jobs": "job", "job.batch": "job"}


def parse_target(text: str) -> tuple[str, str]:
    """``job/NAME`` or ``pod/NAME`` (kubectl's ``TYPE/NAME``) -> ("job"|"pod", NAME)."""
    kind, slash, name = text.partition("/")
    if not slash or not name or kind.lower() not in KINDS:
        raise UsageError(f"{text!r}: name a pod or a Job as pod/NAME or job/NAME")
    return KINDS[kind.lower()], name


def _involves(event: Mapping[str, Any], *, name: str, uid: str | None) -> bool:
    """Whether ``event`` is about the object ``name`` (of ``uid``, when known: a re-created
    object of the same name has other events)."""
    involved = event.get("involvedObject") or {}
    return involved.get("name") in (name, None) and (uid is None or involved.get("uid") in (uid, None, ""))


def _of_this_job(event: Mapping[str, Any], *, since: str, pods: AbstractSet[str]) -> bool:
    """Whether a pod's ``event`` is of the Job created at ``since`` whose pods now are ``pods``
    (UIDs): its pod is one of them, or the event began once the Job existed (a pod of an earlier
    Job of the same name left its events before that Job was deleted)."""
    if str((event.get("involvedObject") or {}).get("uid") or "") in pods:
        return True
    began = str(event.get("firstTimestamp") or event.get("eventTime") or event.get("lastTimestamp") or "")
    return not since or not began or moment(began) >= moment(since)


class FactReader:
    def __init__(self, *, api: KubeApi, inspect: InspectApi) -> None:
        self.api = api
        self.inspect = inspect
        # "ns/name" of each pod listed, by UID, per namespace listed ("" for all namespaces);
        # or why that list could not be read.
        self._pods_by_uid: dict[str, dict[str, str] | str] = {}

    def facts(self, *, kind: str, name: str, namespace: str) -> Facts:
        try:
            if kind == "pod":
                return self._pod_facts(namespace, name)
            job = self.job(namespace, name, with_pods=True)
        except NotFound:
            return self._gone(kind=kind, namespace=namespace, name=name)
        return Facts(job=job, cellfit=self.view(pod=None, job=job), now=time.time())

    def _pod_facts(self, namespace: str, name: str) -> Facts:
        """The pod, and its Job when the user may read it: a Job deleted a moment ago (its pods
        go after it) or one the user's role does not cover leaves the pod's own answer."""
        obj = self.api.get(f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}", what=f"pod {namespace}/{name}")
        pod = pod_from(obj, events=self.events(namespace, "Pod", name, uid=obj["metadata"].get("uid")))
        preempted = preempted_event(pod.events) if pod.deleting else None
        if preempted is not None:
            pod = replace(pod, preemption=self._preemption(namespace, name, preempted))
        owner = next((o for o in obj["metadata"].get("ownerReferences") or []
                      if is_batch_job(kind=o.get("kind", ""), api_version=o.get("apiVersion", ""))), None)
        job: JobFacts | None = None
        notes: tuple[str, ...] = ()
        if owner is not None:
            try:
                job = self.job(namespace, owner["name"], with_pods=False)
            except (NotFound, Forbidden) as error:
                notes = (f"its Job {namespace}/{owner['name']} is not read: {error}",)
        return Facts(pod=pod, job=job, cellfit=self.view(pod=pod, job=job), notes=notes, now=time.time())

    def _gone(self, *, kind: str, namespace: str, name: str) -> Facts:
        """A pod or Job that no longer exists, from the events it left; not found when it left
        none (it never was, or long ago)."""
        what = f"{'pod' if kind == 'pod' else 'Job'} {namespace}/{name}"
        try:
            events = self.events(namespace, "Pod" if kind == "pod" else "Job", name)
        except (NotFound, Forbidden):
            events = ()
        if not events:
            raise NotFound(f"{what} not found")
        preempted = preempted_event(events) if kind == "pod" else None
        preemption = self._preemption(namespace, name, preempted) if preempted is not None else None
        return Facts(gone=GoneFacts(kind=kind, namespace=namespace, name=name, events=events, preemption=preemption))

    def job(self, namespace: str, name: str, *, with_pods: bool) -> JobFacts:
        path = f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs/{quote(name)}"
        obj = self.api.get(path, what=f"Job {namespace}/{name}")
        pods: tuple[PodFacts, ...] = ()
        owned: list[Mapping[str, Any]] = []
        if with_pods:
            uid = obj["metadata"].get("uid")
            listed = self.api.get(f"/api/v1/namespaces/{quote(namespace)}/pods", what=f"pods in namespace {namespace}",
                                  query={"labelSelector": f"job-name={name}"})["items"]
            owned = [p for p in listed if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]
            pods = tuple(pod_from(p, events=self.events(namespace, "Pod", p["metadata"]["name"], uid=p["metadata"].get("uid")))
                         for p in owned)
        sampling = self.sampling_pods(namespace, obj) if with_pods else ()
        ours = frozenset(str(p["metadata"].get("uid")) for p in owned) if with_pods else frozenset()
        preemptions = self.preemptions(namespace, name, since=str(obj["metadata"].get("creationTimestamp") or ""), pods=ours)
        return job_from(obj, events=self.events(namespace, "Job", name, uid=obj["metadata"].get("uid")), pods=pods,
                        preemptions=preemptions, sampling_pods=sampling)

    def sampling_pods(self, namespace: str, obj: Mapping[str, Any]) -> tuple[PodFacts, ...]:
        """An interchangeable Job's pending sampling pods (the estimator labels them with the Job's
        UID), with their Events: why one waits (the leader's CellsNotReclaimed) is told there
        only. () for another Job, or where they cannot be listed."""
        uid = obj["metadata"].get("uid")
        if not uid or ANNOTATION_CONFIGURATIONS not in (obj["metadata"].get("annotations") or {}):
            return ()
        try:
            listed = self.api.get(f"/api/v1/namespaces/{quote(namespace)}/pods", what=f"pods in namespace {namespace}",
                                  query={"labelSelector": f"{LABEL_SAMPLE_JOB}={uid}"})["items"]
            pending = [p for p in listed if not (p.get("spec") or {}).get("nodeName")
                       and (p.get("status") or {}).get("phase", "Pending") == "Pending"][:MAX_NAMED]
            return tuple(pod_from(p, events=self.events(namespace, "Pod", p["metadata"]["name"], uid=p["metadata"].get("uid")))
                         for p in pending)
        except (Forbidden, NotFound):
            return ()

    def events(self, namespace: str, kind: str, name: str, *, uid: str | None = None) -> tuple[Event, ...]:
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        items = self._events(namespace, selector)
        return events_from([i for i in items if _involves(i, name=name, uid=uid)])

    def _events(self, namespace: str, selector: str) -> list[Mapping[str, Any]]:
        found = self.api.get(f"/api/v1/namespaces/{quote(namespace)}/events", what=f"events in namespace {namespace}",
                             query={"fieldSelector": selector})
        return list(found.get("items") or [])

    def preemptions(self, namespace: str, job: str, *, since: str = "", pods: AbstractSet[str] = frozenset()) -> tuple[Preemption, ...]:
        """The Job's pods preempted (gone by now: their Preempted events remain), one per pod:
        cellfit's event ("preempted by ns/pod") completed by the preemptor's Preempting event,
        which holds the score breakdown; kube-scheduler's own ("Preempted by pod <uid> on node
        N") where cellfit's is missing. Gone pods are the Job's by their names only, which an
        earlier Job of the same name gave its pods too (user26 #3): a pod counts when it is one
        of ``pods`` (the Job's own, by UID) or its Event began at or after ``since`` (the Job's
        creationTimestamp)."""
        by_victim: dict[str, list[Event]] = {}
        for item in self._events(namespace, "reason=Preempted,involvedObject.kind=Pod"):
            victim = str((item.get("involvedObject") or {}).get("name") or "")
            if job_pod_name(job, victim) and _of_this_job(item, since=since, pods=pods):
                by_victim.setdefault(victim, []).extend(events_from([item]))
        found: list[Preemption] = []
        for victim, events in by_victim.items():
            preempted = preempted_event(tuple(events))
            if preempted is not None:
                found.append(self._preemption(namespace, victim, preempted))
        return tuple(sorted(found, key=lambda p: moment(p.when)))

    def _preemption(self, namespace: str, victim: str, preempted: Event) -> Preemption:
        """One victim's preemption, completed from its preemptor's events: those of another
        tenant's namespace (FitGpp preempts across them) may be unreadable, and are then said
        to be, the rest of the answer kept."""
        preemptor_events: tuple[Event, ...] = ()
        unread = ""
        preemptor: str | None = None
        by = PREEMPTED_BY.match(preempted.message)
        scheduler = SCHEDULER_PREEMPTED.match(preempted.message)
        if scheduler is not None:
            preemptor, unread = self._pod_named(namespace, scheduler.group("uid"))
        if by is not None and "/" in by.group("by"):
            by_namespace, by_name = by.group("by").split("/", 1)
            try:
                preemptor_events = self.events(by_namespace, "Pod", by_name)
            except NotFound:
                preemptor_events = ()
            except Forbidden:
                unread = f"its score is in the events of namespace {by_namespace}, which you may not read"
        return preemption_from(victim=f"{namespace}/{victim}", preempted=preempted, preemptor_events=preemptor_events,
                               unread=unread, preemptor=preemptor)

    def _pod_named(self, namespace: str, uid: str) -> tuple[str | None, str]:
        """``ns/name`` of the pod of ``uid`` (kube-scheduler's Preempted Event names its preemptor
        only so): looked for among the pods of the victim's namespace, then of every namespace;
        else None and why it stays a UID (gone since, or in a namespace the user may not list)."""
        for scope in (namespace, ""):
            pods = self._pods_of(scope)
            if isinstance(pods, dict) and uid in pods:
                return pods[uid], ""
        head = "kube-scheduler's Preempted Event names its preemptor only by its UID"
        if isinstance(self._pods_of(""), dict):
            return None, f"{head}, and no pod has that UID now: it is gone"
        if isinstance(self._pods_of(namespace), str):
            return None, f"{head}, and you may not list the pods of namespace {namespace}, where it would be named"
        return None, (f"{head}, and no pod of namespace {namespace} has it: a pod of another namespace, whose pods "
                      "you may not list, or one gone since")

    def _pods_of(self, namespace: str) -> dict[str, str] | str:
        """The pods of ``namespace`` (every namespace for "") by UID, read once; or why not."""
        if namespace not in self._pods_by_uid:
            path = f"/api/v1/namespaces/{quote(namespace)}/pods" if namespace else "/api/v1/pods"
            try:
                items = self.api.get(path, what=f"pods in namespace {namespace}" if namespace else "pods of every namespace")["items"]
            except (Forbidden, NotFound) as error:
                self._pods_by_uid[namespace] = str(error)
            else:
                self._pods_by_uid[namespace] = {
                    str(p["metadata"].get("uid")): f"{p['metadata'].get('namespace') or namespace}/{p['metadata'].get('name')}"
                    for p in items or []}
        return self._pods_by_uid[namespace]

    def view(self, *, pod: PodFacts | None, job: JobFacts | None) -> CellfitView:
        """Only the views the answer may need; one cellfit does not serve is noted, not fatal."""
        unavailable: dict[str, str] = {}

        def read(view: str, key: str, query: Mapping[str, str] | None = None) -> Any:
            try:
                return self.inspect.view(view, query=query)
            except ViewUnavailable as error:
                unavailable[key] = str(error)
                return None

        pods = ([pod] if pod is not None else []) + list(job.pods + job.sampling_pods if job is not None else [])
        vc = next((p.vc for p in pods), None)
        virtual_cluster = read(f"virtual-clusters/{quote(vc)}", "virtual-cluster") if vc is not None else None
        holds = read("resume-holds", "resume-holds")
        estimator_entry = allox_entry = None
        if job is not None and job.interchangeable:
            estimates = read("estimates", "estimates") or {}
            estimator_entry = next((j for j in estimates.get("jobs") or []
                                    if j.get("namespace") == job.namespace and j.get("name") == job.name), None)
            allox = read("allox", "allox") or {}
            allox_entry = next((row for rows in (allox.get("queue") or {}).values() for row in rows
                                if row.get("job") == job.key), None)
        replicas = self.replicas() if holds is not None and holds.get("enabled") is not False else 1
        short = isinstance(virtual_cluster, Mapping) and bool(unbound_cells(virtual_cluster))
        tree = read("cells", "cells", {"gpus": "false"}) if short or _short_of_gpus_everywhere(pod) else None
        nodes = sorted(set(bad_nodes(virtual_cluster) if isinstance(virtual_cluster, Mapping) else [])
                       | set(unhealthy_nodes(tree) if short and isinstance(tree, Mapping) else []))
        return CellfitView(virtual_cluster=virtual_cluster, resume_holds=None if holds is None else tuple(holds.get("holds") or []),
                           replicas=replicas, estimator_entry=estimator_entry, allox_entry=allox_entry, unavailable=unavailable,
                           cell_tree=tree if short else None, node_states=self.node_states(nodes[:MAX_NAMED]),
                           largest_node_cell=largest_node_cell(tree) if isinstance(tree, Mapping) else None)

    def node_states(self, names: list[str]) -> dict[str, str]:
        """Why each node is bad to HiveD, as its Node object says: ``deleted`` (not found),
        ``cordoned`` (spec.unschedulable), ``not ready``; a node the user may not read, or none of
        those (GPUs missing), is left out."""
        states: dict[str, str] = {}
        for name in names:
            try:
                obj = self.api.get(f"/api/v1/nodes/{quote(name)}", what=f"node {name}")
            except NotFound:
                states[name] = "deleted"
                continue
            except PluginError:
                continue
            ready = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
            if (obj.get("spec") or {}).get("unschedulable"):
                states[name] = "cordoned"
            elif ready is not None and ready.get("status") != "True":
                states[name] = "not ready"
        return states

    def replicas(self) -> int | None:
        """The cellfit pods behind its Service, ready or not, from the Service's EndpointSlices:
        which of them answered a view is not told, and each keeps resume holds of its own. None
        where they cannot be listed (the chart's viewer role grants only the service proxy)."""
        cellfit = self.inspect.cellfit
        try:
            reply = self.api.raw(f"/apis/discovery.k8s.io/v1/namespaces/{quote(cellfit.namespace)}/endpointslices",
                                 query={"labelSelector": f"kubernetes.io/service-name={cellfit.service}"})
        except PluginError:
            return None
        if reply.status != 200 or not isinstance(reply.body, Mapping):
            return None
        pods = set()
        for item in reply.body.get("items") or []:
            for endpoint in (item or {}).get("endpoints") or []:
                target = endpoint.get("targetRef") or {}
                pods.add(target.get("name") or tuple(endpoint.get("addresses") or ()))
        return len(pods) or None


def _short_of_gpus_everywhere(pod: PodFacts | None) -> bool:
    """Whether kube-scheduler found too few GPUs on some node for ``pod``, pending and asking GPUs:
    cellfit's filter then may never have been asked, and only the cell tree tells whether any
    node could ever hold the pod (``kubectl cellfit why``, user25 #6)."""
    if pod is None or pod.node is not None or pod.gpus <= 0:
        return False
    said = [e.message for e in pod.events if e.reason == "FailedScheduling"]
    if pod.unschedulable is not None:
        said.append(pod.unschedulable.message)
    return any(INSUFFICIENT_GPU in message for message in said)
