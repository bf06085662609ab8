# Only the bundled terraform ruleset: plugins would need a download.
config {
  call_module_type = "local"
}

plugin "terraform" {
  enabled = true
  preset  = "all"
}
