"""Drift tests of vector (embedding) features, on :class:`sketches.vector.VectorProfile`\\ s.

- :mod:`.centroid`: centroid shift (Hotelling's T² in the projection subspace);
- :mod:`.mmd`: maximum mean discrepancy with an RBF kernel on the profiles' samples;
- :mod:`.projections`: the share of projections whose distribution moved;
- :mod:`.norm`: a shift of the vectors' mean norm.
"""
