//! The iLogtail / LoongCollector ConfigServer protocol v2, served to agents.
