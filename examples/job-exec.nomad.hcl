# exec (and docker) bind-mount the dataset at the class's mount path; the
# task writes there and never sees the host path.
job "zfs-scratch-exec" {
  type = "batch"

  group "g" {
    task "write" {
      driver = "exec"

      config {
        command = "/bin/sh"
        args = ["-c", "echo hello > /data/hello && cat /data/hello && grep ' /data ' /proc/mounts"]
      }

      resources {
        device "zfs/dataset/scratch" {
          # Typed attributes from the fingerprint: constrain on them.
          constraint {
            attribute = "${device.attr.quota}"
            operator  = ">="
            value     = "1 GiB"
          }
        }
      }
    }
  }
}
