"""Formal verification of the kernels' index maps (docs/design/formal.md): index expressions as data (`expr`), a
kernel's accesses and maps with the obligations that say it is right (`model`, `views`), the Coq script and coqc's
verdict (`coq`), evaluation for counterexamples and the exhaustive check (`search`), and `verify --formal` (`check`).
"""
