"""Fisher vectors of word vectors + regularised CCA (Klein, Lev, Sadeh,
Wolf, "Associating Neural Word Embeddings with Deep Image Representations
using Fisher Vectors", CVPR 2015): the closed-form fitting parts."""
