//! Cluster membership (chitchat gossip) and main selection.
