"""The fixture directory holds kernels for `nkieval compat` to run, not tests of this suite."""

collect_ignore = ["fixtures"]
