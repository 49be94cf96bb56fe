"""Consumer groups with their consumers, assignments and lags, as Confluent's v3 resources,
over ``backend.groups.selectors`` (the coordinator brokers' answers the console shows).

Lags are reported for the partitions the group has committed offsets for, as Confluent
does; a group's list entry has no coordinator link (the list comes from every broker at
once without describing each group), its own resource has."""

from __future__ import annotations

from rest_framework.response import Response

from backend.core.exceptions import NotFound
from backend.groups import selectors
from backend.restproxy import shapes
from backend.restproxy.base import ClusterView


def _member_of(detail: dict, consumer_id: str) -> dict:
    for m in detail["members"]:
        if m["member_id"] == consumer_id:
            return m
    raise NotFound(f"group {detail['group_id']!r} has no consumer {consumer_id!r}")


def _lags(links, detail: dict) -> list[dict]:
    owner = shapes.owners(detail["members"])
    return [
        shapes.consumer_lag(links, detail["group_id"], r, owner.get((r["topic"], r["partition"])))
        for r in detail["offsets"]
        if r.get("committed_offset") is not None
    ]


class GroupListApi(ClusterView):
    def get(self, request, cluster_id: str):
        links = self.links()
        data = [
            shapes.consumer_group(links, g["group_id"], g["state"], g["type"], None)
            for g in selectors.group_list(organisation=self.organisation)
        ]
        return Response(links.listing("KafkaConsumerGroupList", data, "consumer-groups"))


class GroupDetailApi(ClusterView):
    def get(self, request, cluster_id: str, group_id: str):
        d = selectors.group_detail(organisation=self.organisation, group_id=group_id)
        return Response(
            shapes.consumer_group(
                self.links(), d["group_id"], d["state"], d["type"], d["coordinator"]
            )
        )


class ConsumerListApi(ClusterView):
    def get(self, request, cluster_id: str, group_id: str):
        d = selectors.group_detail(organisation=self.organisation, group_id=group_id)
        links = self.links()
        data = [shapes.consumer(links, d["group_id"], m) for m in d["members"]]
        parts = ("consumer-groups", d["group_id"], "consumers")
        return Response(links.listing("KafkaConsumerList", data, *parts))


class ConsumerDetailApi(ClusterView):
    def get(self, request, cluster_id: str, group_id: str, consumer_id: str):
        d = selectors.group_detail(organisation=self.organisation, group_id=group_id)
        return Response(shapes.consumer(self.links(), d["group_id"], _member_of(d, consumer_id)))


class ConsumerAssignmentListApi(ClusterView):
    def get(self, request, cluster_id: str, group_id: str, consumer_id: str):
        d = selectors.group_detail(organisation=self.organisation, group_id=group_id)
        links = self.links()
        data = shapes.consumer_assignments(links, d["group_id"], _member_of(d, consumer_id))
        parts = ("consumer-groups", d["group_id"], "consumers", consumer_id, "assignments")
        return Response(links.listing("KafkaConsumerAssignmentList", data, *parts))


class LagListApi(ClusterView):
    def get(self, request, cluster_id: str, group_id: str):
        d = selectors.group_detail(organisation=self.organisation, group_id=group_id)
        links = self.links()
        data = _lags(links, d)
        parts = ("consumer-groups", d["group_id"], "lags")
        return Response(links.listing("KafkaConsumerLagList", data, *parts))


class LagDetailApi(ClusterView):
    def get(self, request, cluster_id: str, group_id: str, topic_name: str, partition_id: int):
        d = selectors.group_detail(organisation=self.organisation, group_id=group_id)
        for lag in _lags(self.links(), d):
            if (lag["topic_name"], lag["partition_id"]) == (topic_name, partition_id):
                return Response(lag)
        raise NotFound(
            f"group {group_id!r} has no committed offset for {topic_name}-{partition_id}"
        )


class LagSummaryApi(ClusterView):
    def get(self, request, cluster_id: str, group_id: str):
        d = selectors.group_detail(organisation=self.organisation, group_id=group_id)
        links = self.links()
        return Response(shapes.lag_summary(links, d["group_id"], _lags(links, d)))
