"""Generated code for the informerd.v1 API (see generate.sh). Do not edit."""
