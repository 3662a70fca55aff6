"""Online false-discovery-rate control over the endless stream of tests a fleet produces.

Procedures follow the onlineFDR R package (Robertson et al., 2019; defaults and
gamma sequences as there): LORD++ and LOND (Javanmard & Montanari 2018; Ramdas
et al. 2017), SAFFRON (Ramdas et al. 2018), BatchPRDS and BatchBH (Zrnic et al.
2020). Pure state machines: no clock, no I/O; their state is plain data.
"""
