"""Read the world: the app and its children (Kubernetes), partition counts (Kafka), progress (driver)."""
