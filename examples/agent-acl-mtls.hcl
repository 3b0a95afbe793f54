# A client with ACLs and mutual TLS: the plugin's allocation watcher talks to
# this node's agent over HTTPS with a client certificate and a token of the
# least-privilege policy in nomad-device-zfs.policy.hcl. The token is read
# from a file and re-read when the API answers 401/403, so rotating it needs
# no restart. With client_id_file the token needs no agent:read.
plugin_dir = "/opt/nomad/plugins"
data_dir   = "/opt/nomad/data"

plugin "nomad-device-zfs" {
  config {
    parent = "tank/nomad"

    nomad {
      address         = "https://127.0.0.1:4646"
      token_file      = "/etc/nomad.d/nomad-device-zfs.token"
      ca_file         = "/etc/nomad.d/tls/nomad-agent-ca.pem"
      cert_file       = "/etc/nomad.d/tls/global-cli-nomad.pem"
      key_file        = "/etc/nomad.d/tls/global-cli-nomad-key.pem"
      tls_server_name = "client.global.nomad"
      client_id_file  = "/opt/nomad/data/client/client-id"
    }

    class "scratch" {
      slots = 4
      properties {
        quota = "1G"
      }
      mount = "/data"
    }
  }
}
