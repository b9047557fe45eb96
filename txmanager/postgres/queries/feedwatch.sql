-- The long polls' watch of the feed's head (feedwatch.go), on a connection
-- of its own.

-- name: CurrentSchema
-- The schema the connection works in: announcements of other schemas'
-- feeds (other deployments, tests) share the channel and are ignored.
SELECT current_schema();

-- name: ListenFeed
-- Listens for the sequencer's announcements of a new head (MoveFeedHead
-- sends them on this channel).
LISTEN txfence_feed;
