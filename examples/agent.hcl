# Nomad client configuration for nomad-device-zfs: one class of scratch
# datasets. Install the plugin binary as <plugin_dir>/nomad-device-zfs (the
# file name must match the plugin block's label) and create the parent first:
#
#   zfs create -o compression=lz4 tank/nomad
#
plugin_dir = "/opt/nomad/plugins"

plugin "nomad-device-zfs" {
  config {
    # Required. The plugin owns what it creates below this dataset and
    # nothing else; it never creates, changes or destroys the parent itself.
    parent = "tank/nomad"

    # Optional: a Prometheus endpoint at http://127.0.0.1:9646/metrics
    # (docs/metrics.md; examples/grafana-dashboard.json).
    metrics {
      address = "127.0.0.1:9646"
    }

    class "scratch" {
      slots = 4                       # ready datasets kept for this class
      properties {                    # set on every slot at creation
        quota       = "1G"
        compression = "lz4"
      }
      mount = "/data"                 # path inside exec/docker tasks
    }
  }
}
