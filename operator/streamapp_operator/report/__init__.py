"""Tell the world: the status subresource, Kubernetes events, the operator's own metrics."""
