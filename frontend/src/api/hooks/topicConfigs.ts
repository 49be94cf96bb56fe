// What a new topic gets by default and what each topic config is (kind, unit, bounds,
// choices, default, description): one registry on the control plane, read once per session.
import { useQuery } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type ConfigDefinition = Schemas["ConfigDefinition"];
export type TopicConfigDefinitions = Schemas["TopicConfigDefinitionsOutput"];

export function useTopicConfigDefinitions() {
  return useQuery({
    queryKey: ["topic-config-definitions"],
    queryFn: () => unwrap(client.GET("/api/v1/topic-config-definitions")),
    staleTime: 60_000,
  });
}
