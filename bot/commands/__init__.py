"""The commands: each module composes the rooms beside it (checkout, measure, judge, render,
github, history, shards, cache) into one thing a user asks for, and returns objects; only
``bot/cli`` prints."""
