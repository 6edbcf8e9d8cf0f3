"""The kind node's default StorageClass manifest (/kind/manifests/default-storage.yaml, which `kind
create cluster` applies), made from local-path-provisioner's own deploy/local-path-storage.yaml:
usage: storage_manifest.py <local-path-storage.yaml> <provisioner image> <helper image>

Changed from the module's manifest, as kind's node images have it: the class is `standard` and the
cluster's default; the provisioner tolerates the control plane (a one-node cluster); volumes live
under /var/local-path-provisioner (/var is the node's volume); the images are our preloaded ones.
Text edits with checks rather than a YAML library: the host's python3 needs nothing beyond its own.
"""

import sys


def edit(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        sys.exit(f"storage_manifest.py: expected {old!r} once in the manifest")
    return text.replace(old, new)


def main(source: str, provisioner: str, helper: str) -> str:
    text = open(source).read()
    text = edit(text, "image: rancher/local-path-provisioner:", f"image: {provisioner}  # was rancher/local-path-provisioner:")
    text = edit(text, "image: busybox", f"image: {helper}")
    text = edit(text, "/opt/local-path-provisioner", "/var/local-path-provisioner")
    text = edit(text, "      serviceAccountName: local-path-provisioner-service-account\n",
                "      serviceAccountName: local-path-provisioner-service-account\n"
                "      tolerations:\n"
                "        - key: node-role.kubernetes.io/control-plane\n"
                "          operator: Exists\n"
                "          effect: NoSchedule\n")
    text = edit(text, "kind: StorageClass\nmetadata:\n  name: local-path\n",
                "kind: StorageClass\nmetadata:\n  name: standard\n  annotations:\n"
                "    storageclass.kubernetes.io/is-default-class: \"true\"\n")
    return text


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.stdout.write(main(*sys.argv[1:]))
