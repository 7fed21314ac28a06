"""The validating admission webhook server, its decision log and the ``trtguard`` command line."""
