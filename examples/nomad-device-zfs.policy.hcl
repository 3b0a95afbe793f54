# ACL policy for the plugin's allocation watcher: the least privilege. The
# CLI's integration test runs a real agent with a token of exactly this
# policy, and `nomad-device-zfs-ctl doctor` names the line a token lacks.
#
#   nomad acl policy apply -description "nomad-device-zfs allocation watcher" \
#     nomad-device-zfs nomad-device-zfs.policy.hcl

node { policy = "read" }                        # this node's allocations
namespace "*" { capabilities = ["read-job"] }   # every namespace whose jobs use the device

# Only without nomad.client_id_file (the plugin then asks /v1/agent/self
# for its node ID):
# agent { policy = "read" }
