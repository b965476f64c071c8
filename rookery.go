package rookery

import "strings"

// User is a user of the app that runs Rookery. Counts are kept by the event pipeline's counters.
type User struct {
	ID             string `json:"id"`
	Username       string `json:"username"`
	DisplayName    string `json:"display_name"`
	Bio            string `json:"bio"`
	TimeZone       string `json:"timezone"`
	CreatedAt      Time   `json:"created_at"`
	FollowerCount  int64  `json:"follower_count"`
	FollowingCount int64  `json:"following_count"`
	PostCount      int64  `json:"post_count"`
}

// FieldError says what is wrong with one field of a request.
type FieldError struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// FieldErrors is the cause of an Invalid error about request fields; httpapi lists them in the
// problem's "fields".
type FieldErrors []FieldError

func (fe FieldErrors) Error() string {
	parts := make([]string, len(fe))
	for i, f := range fe {
		parts[i] = f.Name + ": " + f.Reason
	}
	return strings.Join(parts, "; ")
}

// Add appends a field error.
func (fe *FieldErrors) Add(name, reason string) { *fe = append(*fe, FieldError{name, reason}) }

// Err returns an Invalid error carrying fe, or nil if fe is empty.
func (fe FieldErrors) Err(op Op) error {
	if len(fe) == 0 {
		return nil
	}
	return E(op, Invalid, "invalid request fields: "+fe.Error(), fe)
}

// Author is the part of a user shown with what they wrote.
type Author struct {
	ID          string `json:"id"`
	Username    string `json:"username"`
	DisplayName string `json:"display_name"`
}

// Media is a reference to a media object the app stores elsewhere.
type Media struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Visibility says who may see a post.
const (
	Public    = "public"    // everyone
	Followers = "followers" // the author and the author's followers
)

// Post is a post as the API shows it.
type Post struct {
	ID           string   `json:"id"`
	Author       Author   `json:"author"`
	Text         string   `json:"text"`
	Tags         []string `json:"tags"`
	Mentions     []string `json:"mentions"`
	Media        []Media  `json:"media"`
	Visibility   string   `json:"visibility"`
	CreatedAt    Time     `json:"created_at"`
	EditedAt     Time     `json:"edited_at"`
	LikeCount    int64    `json:"like_count"`
	CommentCount int64    `json:"comment_count"`
	LikedByMe    bool     `json:"liked_by_me"`
}
