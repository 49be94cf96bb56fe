import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "../client";

export type Topic = Schemas["TopicOutput"];
export type TopicDetail = Schemas["TopicDetailOutput"];
export type TopicCreate = Schemas["TopicListInputRequest"];

export function useTopics() {
  return useQuery({
    queryKey: ["topics"],
    queryFn: () => unwrap(client.GET("/api/v1/topics/")),
  });
}

export function useTopic(name: string) {
  return useQuery({
    queryKey: ["topics", name],
    queryFn: () => unwrap(client.GET("/api/v1/topics/{name}", { params: { path: { name } } })),
  });
}

export function useCreateTopic() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (body: TopicCreate) => unwrap(client.POST("/api/v1/topics/", { body })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["topics"] }),
  });
}

export function useAlterTopicConfigs(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (configs: Record<string, string | null>) =>
      unwrap(
        client.PATCH("/api/v1/topics/{name}", {
          params: { path: { name } },
          body: { configs, validate_only: false },
        }),
      ),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["topics"] }),
  });
}

export function useDeleteTopic() {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (name: string) =>
      unwrap(client.DELETE("/api/v1/topics/{name}", { params: { path: { name } } })),
    onSuccess: () => qc.invalidateQueries({ queryKey: ["topics"] }),
  });
}

export function useAddPartitions(name: string) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: (partitions: number) =>
      unwrap(
        client.POST("/api/v1/topics/{name}/partitions", {
          params: { path: { name } },
          body: { partitions, validate_only: false },
        }),
      ),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: ["topics"] });
      qc.invalidateQueries({ queryKey: ["partitions"] });
    },
  });
}
